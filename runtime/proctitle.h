/*
 * runtime/proctitle.h: a worker's process title, as `ps` and `top` show it
 * (private to runtime/; proctitle.c).
 *
 *     shmrun_proctitle_init(argc, argv)   first thing in shmrun_main()
 *     shmrun_proctitle_set("shmrun: %s worker %u cpu %d", ...)   in a worker
 */
#ifndef SHMRUN_RT_PROCTITLE_H
#define SHMRUN_RT_PROCTITLE_H

/*
 * shmrun_proctitle_init() - remember the process's argument area, so that a
 * title can later be written over it: only when @argv is the argument vector
 * the kernel gave this process (argv[0] at /proc/self/stat's arg_start; a
 * program embedding shmrun_main() with an array of its own is left alone).
 * Each argv[i] is then pointed at a heap copy of its string, so nothing that
 * reads the arguments afterwards (getopt's optarg, paths kept from them) sees
 * the title. Call once, before anything keeps a pointer into argv.
 */
void shmrun_proctitle_init(int argc, char **argv);

/*
 * shmrun_proctitle_set() - this process's title: the thread name
 * (PR_SET_NAME, 15 bytes: @comm) and, after shmrun_proctitle_init() found
 * the argument area, the command line `ps` prints (@fmt, cut to the
 * length of the original arguments).
 */
void shmrun_proctitle_set(const char *comm, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* SHMRUN_RT_PROCTITLE_H */
