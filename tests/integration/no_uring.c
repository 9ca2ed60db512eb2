/*
 * tests/integration/no_uring.c: run a command where io_uring is blocked, as
 * a container's seccomp profile blocks it (tests/integration/no_uring.sh,
 * issue 14 §2).
 *
 *   no_uring [--errno EPERM|ENOSYS|ENOMEM] COMMAND [ARG...]
 *
 * Installs a seccomp filter (libseccomp) under which io_uring_setup(2),
 * io_uring_enter(2) and io_uring_register(2) fail with the errno given
 * (default EPERM, what Docker's default profile returns since 2023; ENOSYS is
 * what older profiles and kernels built without io_uring give; ENOMEM what
 * the kernel gives a user without CAP_IPC_LOCK when RLIMIT_MEMLOCK is too low
 * for the rings: tests/integration/memlock.sh, as root), then execs
 * COMMAND. The filter is inherited across fork and exec, so the launcher and
 * every worker it forks see io_uring blocked. Every other system call is
 * allowed.
 *
 * Exit: COMMAND's status (it replaces this process); 2 for a usage error;
 * 1 if the filter cannot be installed or COMMAND cannot be run.
 *
 * Rejected: a switch in the runtime (SHMRUN_NO_IO_URING=1 exists, but it
 * skips io_uring_queue_init() entirely, so it cannot test the path that reads
 * the kernel's refusal and explains it); raw BPF as in
 * tests/unit/check_ckpt_io.c (fine for one syscall in one test process;
 * libseccomp handles the architecture check and the syscall numbers).
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const blocked[] = {"io_uring_setup", "io_uring_enter", "io_uring_register"};

static int usage(void)
{
	fprintf(stderr, "usage: no_uring [--errno EPERM|ENOSYS|ENOMEM] COMMAND [ARG...]\n");
	return 2;
}

int main(int argc, char **argv)
{
	scmp_filter_ctx ctx;
	int err = EPERM, i = 1, rc;

	if (i + 1 < argc && !strcmp(argv[i], "--errno")) {
		if (!strcmp(argv[i + 1], "EPERM"))
			err = EPERM;
		else if (!strcmp(argv[i + 1], "ENOSYS"))
			err = ENOSYS;
		else if (!strcmp(argv[i + 1], "ENOMEM"))
			err = ENOMEM;
		else
			return usage();
		i += 2;
	}
	if (i >= argc)
		return usage();
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		fprintf(stderr, "no_uring: seccomp_init failed\n");
		return 1;
	}
	for (size_t k = 0; k < sizeof(blocked) / sizeof(blocked[0]); k++) {
		int nr = seccomp_syscall_resolve_name(blocked[k]);

		if (nr == __NR_SCMP_ERROR) {
			fprintf(stderr, "no_uring: libseccomp does not know %s\n", blocked[k]);
			goto err_release;
		}
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0);
		if (rc < 0) {
			fprintf(stderr, "no_uring: seccomp_rule_add(%s): %s\n", blocked[k],
				strerror(-rc));
			goto err_release;
		}
	}
	rc = seccomp_load(ctx);
	if (rc < 0) {
		fprintf(stderr, "no_uring: seccomp_load: %s\n", strerror(-rc));
		goto err_release;
	}
	seccomp_release(ctx);
	execvp(argv[i], argv + i);
	fprintf(stderr, "no_uring: %s: %s\n", argv[i], strerror(errno));
	return 1;

err_release:
	seccomp_release(ctx);
	return 1;
}
