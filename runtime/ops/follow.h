/*
 * runtime/ops/follow.h: file_source with `follow = true` (follow.c), called
 * by file_source.c, which dispatches on the key. Private to runtime/ops.
 */
#ifndef SHMRUN_OPS_FOLLOW_H
#define SHMRUN_OPS_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include <shmrun/operator.h>

struct follow;

/*
 * shmrun_file_source_paths() - file_source's `path` entries with every brace
 * pattern replaced by its alternatives, one per line, into *@out (malloc'd,
 * the caller frees it). Implemented in file_source.c. Return: 0; -E2BIG
 * (reported); -ENOMEM.
 */
int shmrun_file_source_paths(struct shmrun_task *task, char **out);

/*
 * shmrun_follow_open() - set up a following instance: its watches, and,
 * unless restoring, the files it owns (read from 0). Return: 0 with *@fw
 * set (owned by the caller until shmrun_follow_close()); -ENOMEM; a
 * negative errno after a message.
 */
int shmrun_follow_open(struct shmrun_task *task, struct follow **fw);

/* shmrun_follow_produce() - as produce(): never 0 (follow never ends). */
int shmrun_follow_produce(struct shmrun_task *task, struct follow *fw, uint32_t budget);

/* shmrun_follow_snapshot() - one per-worker entry per watch this instance owns. */
int shmrun_follow_snapshot(struct shmrun_task *task, struct follow *fw);

/*
 * shmrun_follow_restore() - take one restored entry (kept; the files are
 * found at the first produce() or snapshot()). Return: 0; -EBADMSG after a
 * message (not an entry of a following source, or of another `path`);
 * -ENOMEM.
 */
int shmrun_follow_restore(struct shmrun_task *task, struct follow *fw, const void *entry,
			  uint32_t len);

/* shmrun_follow_check_restore() - as check_restore(): the entry parses. */
int shmrun_follow_check_restore(struct shmrun_task *task, const void *entry, uint32_t len);

/* shmrun_follow_close() - close every file and free @fw (NULL: nothing). */
void shmrun_follow_close(struct follow *fw);

#endif /* SHMRUN_OPS_FOLLOW_H */
