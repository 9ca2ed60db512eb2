/*
 * runtime/ckpt/fault.c: the test-only fault switches of checkpoints,
 * compiled only with -DSHMRUN_FAULT_INJECTION=ON (fault.h gives inline no-ops
 * otherwise, so a release build reads none of these variables):
 *
 *   SHMRUN_FAULT                       I/O faults in ckpt_io.c (rules in fault.h)
 *   SHMRUN_TEST_SLOW_SNAPSHOT=e:ms     writers of epoch e are late
 *   SHMRUN_TEST_FAIL_EPOCH=e           every write of epoch e fails with EIO
 *   SHMRUN_TEST_KILL_SNAPSHOT_EPOCH=e  the writers of epoch e die unreported
 *   SHMRUN_TEST_CALLBACK=op.cb:action:n[:file]  an operator callback crashes
 *                                      or hangs (fault.h)
 *
 * Invariant: with the option off no code path of the product depends on the
 * environment here; with it on, an unset variable changes nothing.
 *
 * Rejected: #ifdefs in the bodies of ckpt_io.c and snapshot.c — the hooks
 * would be scattered and a release build would still have to be read around
 * them; a link-time seam (a test library overriding weak symbols) — the shell
 * tests drive the real `shmrun` binary, which must carry the hooks itself.
 */
#ifdef SHMRUN_FAULT_INJECTION

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"

/* ---- SHMRUN_FAULT ---------------------------------------------------------------- */

enum fault_kind { FAULT_WRITE, FAULT_FSYNC, FAULT_SHORT };

struct fault_rule {
	enum fault_kind kind;
	int err;	 /* errno to report (FAULT_WRITE, FAULT_FSYNC) */
	unsigned long n; /* fires on the n-th operation of its kind */
};

#define MAX_FAULTS 8

static struct {
	bool parsed;
	bool bad; /* SHMRUN_FAULT was set but not understood */
	struct fault_rule rules[MAX_FAULTS];
	unsigned nrules;
	unsigned long writes, fsyncs; /* operations so far */
} faults;

static const struct {
	const char *name;
	int err;
} fault_errnos[] = {
    {"EIO", EIO},     {"ENOSPC", ENOSPC}, {"EDQUOT", EDQUOT}, {"EFBIG", EFBIG},
    {"EROFS", EROFS}, {"EINTR", EINTR},	  {"EAGAIN", EAGAIN}, {"ECANCELED", ECANCELED},
};

static int parse_errno(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(fault_errnos) / sizeof(fault_errnos[0]); i++)
		if (strlen(fault_errnos[i].name) == len && !strncmp(s, fault_errnos[i].name, len))
			return fault_errnos[i].err;
	return 0;
}

/* One rule of SHMRUN_FAULT, "kind:ERRNO:n" or "kind:n", [s, s + len). */
static int parse_rule(const char *s, size_t len, struct fault_rule *r)
{
	char tmp[64], *colon, *end;
	const char *num;

	if (len >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	colon = strchr(tmp, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	num = colon + 1;
	if (!strcmp(tmp, "write") || !strcmp(tmp, "fsync")) {
		char *c2 = strchr(num, ':');

		if (!c2)
			return -EINVAL;
		r->kind = tmp[0] == 'w' ? FAULT_WRITE : FAULT_FSYNC;
		r->err = parse_errno(num, (size_t)(c2 - num));
		if (!r->err)
			return -EINVAL;
		num = c2 + 1;
	} else if (!strcmp(tmp, "short")) {
		r->kind = FAULT_SHORT;
		r->err = 0;
	} else if (!strcmp(tmp, "eintr") || !strcmp(tmp, "eagain")) {
		r->kind = FAULT_WRITE;
		r->err = tmp[1] == 'i' ? EINTR : EAGAIN;
	} else {
		return -EINVAL;
	}
	if (*num < '1' || *num > '9')
		return -EINVAL;
	errno = 0;
	r->n = strtoul(num, &end, 10);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

static void fault_parse(void)
{
	const char *s = getenv("SHMRUN_FAULT");

	if (faults.parsed)
		return;
	faults.parsed = true;
	if (!s || !*s)
		return;
	for (;;) {
		size_t len = strcspn(s, ",");

		if (!len || faults.nrules == MAX_FAULTS ||
		    parse_rule(s, len, &faults.rules[faults.nrules]) < 0) {
			faults.bad = true;
			faults.nrules = 0;
			return;
		}
		faults.nrules++;
		s += len;
		if (!*s)
			break;
		s++; /* the comma: a rule must follow */
	}
}

void shmrun_ckpt_fault_reload(void)
{
	memset(&faults, 0, sizeof(faults));
}

void shmrun_ckpt_fault_counts(unsigned long *writes, unsigned long *fsyncs)
{
	if (writes)
		*writes = faults.writes;
	if (fsyncs)
		*fsyncs = faults.fsyncs;
}

/* What the next write submission does: 0, -errno to report, or 1 = write short. */
int shmrun_fault_on_write(void)
{
	fault_parse();
	faults.writes++;
	for (unsigned i = 0; i < faults.nrules; i++) {
		const struct fault_rule *r = &faults.rules[i];

		if (r->n != faults.writes)
			continue;
		if (r->kind == FAULT_WRITE)
			return -r->err;
		if (r->kind == FAULT_SHORT)
			return 1;
	}
	return 0;
}

/* What the next fsync does: 0 or -errno to report. */
int shmrun_fault_on_fsync(void)
{
	fault_parse();
	faults.fsyncs++;
	for (unsigned i = 0; i < faults.nrules; i++)
		if (faults.rules[i].kind == FAULT_FSYNC && faults.rules[i].n == faults.fsyncs)
			return -faults.rules[i].err;
	return 0;
}

bool shmrun_fault_bad(void)
{
	fault_parse();
	return faults.bad;
}

/* ---- snapshot writers ------------------------------------------------------------ */

/*
 * Test-only: SHMRUN_TEST_SLOW_SNAPSHOT=e:ms makes the writers of epoch e wait
 * ms before they create its directory and again after their file is written:
 * a late writer of an aborted epoch, still busy when the job ends.
 */
void shmrun_fault_slow_snapshot(uint64_t e)
{
	const char *se = getenv("SHMRUN_TEST_SLOW_SNAPSHOT");

	if (se && strchr(se, ':') && strtoull(se, NULL, 10) == e)
		usleep((useconds_t)(strtoul(strchr(se, ':') + 1, NULL, 10) * 1000));
}

/*
 * In the snapshot writer of epoch @e, before it writes.
 */
void shmrun_fault_snapshot_epoch(uint64_t e)
{
	/* Test-only: SHMRUN_TEST_FAIL_EPOCH=e makes every write of epoch e
	 * fail with EIO (the fault switch of ckpt_io.h, armed here so it
	 * hits one epoch, not every snapshot child). */
	const char *fe = getenv("SHMRUN_TEST_FAIL_EPOCH");
	const char *ke = getenv("SHMRUN_TEST_KILL_SNAPSHOT_EPOCH");

	/* Test-only: the writer of epoch e dies without reporting. */
	if (ke && strtoull(ke, NULL, 10) == e)
		raise(SIGKILL);
	if (fe && strtoull(fe, NULL, 10) == e) {
		setenv("SHMRUN_FAULT", "write:EIO:1", 1);
		shmrun_ckpt_fault_reload();
	}
}

/* SHMRUN_TEST_STATE_ENOMEM=1: setup's key-bound state allocation fails. */
bool shmrun_fault_state_enomem(void)
{
	const char *v = getenv("SHMRUN_TEST_STATE_ENOMEM");

	return v && strcmp(v, "1") == 0;
}

/* SHMRUN_TEST_SLOW_JUDGE=ms: a pause inside the coordinator's commit judgement. */
void shmrun_fault_slow_judge(void)
{
	const char *v = getenv("SHMRUN_TEST_SLOW_JUDGE");

	if (v && *v)
		usleep((useconds_t)(strtoul(v, NULL, 10) * 1000));
}

/* SHMRUN_TEST_SLOW_EXIT=ms: a pause between the end of a run and the launcher's exit. */
void shmrun_fault_slow_exit(void)
{
	const char *v = getenv("SHMRUN_TEST_SLOW_EXIT");

	if (v && *v)
		usleep((useconds_t)(strtoul(v, NULL, 10) * 1000));
}

void shmrun_fault_slow_restore(uint32_t worker)
{
	const char *v = getenv("SHMRUN_TEST_SLOW_RESTORE");
	char *end;
	unsigned long w, ms;

	if (!v || !*v)
		return;
	w = strtoul(v, &end, 10);
	if (*end != ':' || w != worker)
		return;
	ms = strtoul(end + 1, NULL, 10);
	usleep((useconds_t)(ms * 1000));
}

/* ---- operator callbacks ---------------------------------------------------------- */

/* SHMRUN_TEST_CALLBACK, parsed once per process (a forked worker inherits it). */
static struct {
	bool parsed, fired;
	char op[64], cb[64], action[16];
	unsigned long n, seen, hang_ms;
	const char *file; /* in the environment string, or NULL */
} cbf;

/*
 * A real segmentation fault: a store to a page mapped PROT_NONE. Unlike a store
 * through a null pointer it is not undefined behaviour, so UBSan (built with
 * -fno-sanitize-recover) does not stop the process first with exit status 1.
 */
static void fault_segv(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		*(volatile int *)p = 1;
	raise(SIGSEGV); /* no mapping to fault on: the same signal */
}

static void callback_parse(void)
{
	const char *v = getenv("SHMRUN_TEST_CALLBACK"), *dot, *c1, *c2, *c3;
	size_t lo, lc, la;

	cbf.parsed = true;
	if (!v || !(dot = strchr(v, '.')) || !(c1 = strchr(dot, ':')) || !(c2 = strchr(c1 + 1, ':')))
		return;
	lo = (size_t)(dot - v);
	lc = (size_t)(c1 - dot - 1);
	la = (size_t)(c2 - c1 - 1);
	if (lo >= sizeof(cbf.op) || lc + 2 >= sizeof(cbf.cb) || la >= sizeof(cbf.action))
		return;
	memcpy(cbf.op, v, lo);
	memcpy(cbf.cb, dot + 1, lc);
	memcpy(cbf.cb + lc, "()", 3); /* as shmrun_cb_name() writes it */
	memcpy(cbf.action, c1 + 1, la);
	cbf.n = strtoul(c2 + 1, NULL, 10);
	c3 = strchr(c2 + 1, ':');
	cbf.file = c3 && c3[1] ? c3 + 1 : NULL;
	if (!strncmp(cbf.action, "hang=", 5))
		cbf.hang_ms = strtoul(cbf.action + 5, NULL, 10);
}

void shmrun_fault_callback(const char *op, const char *cb)
{
	int fd;

	if (!cbf.parsed)
		callback_parse();
	if (!cbf.n || cbf.fired || strcmp(op, cbf.op) || strcmp(cb, cbf.cb))
		return;
	if (++cbf.seen < cbf.n || (!cbf.file && cbf.seen > cbf.n))
		return;
	if (cbf.file) {
		fd = open(cbf.file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return; /* it exists: fired already in this job, or not armed yet */
		close(fd);
	}
	cbf.fired = true;
	if (!strcmp(cbf.action, "segv"))
		fault_segv();
	else if (!strcmp(cbf.action, "abort"))
		abort();
	else if (!strcmp(cbf.action, "bus"))
		raise(SIGBUS);
	else if (!strcmp(cbf.action, "fpe"))
		raise(SIGFPE);
	else if (!strcmp(cbf.action, "ill"))
		raise(SIGILL);
	else if (cbf.hang_ms) {
		struct timespec ts = {(time_t)(cbf.hang_ms / 1000), (long)(cbf.hang_ms % 1000) * 1000000};

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

#else

typedef int shmrun_fault_off; /* ISO C: a translation unit is not empty */

#endif /* SHMRUN_FAULT_INJECTION */
