/*
 * runtime/ops/input_check.h: is an input file one whose size can be trusted?
 *
 * Files of pseudo file systems (/proc, /sys, debugfs, ...) report a size that
 * is not their content's (0, or sysfs's 4096) and change on every read:
 * operators that size their work from st_size (file_source's pieces,
 * lookup's table) refuse them before anything starts.
 */
#ifndef SHMRUN_OPS_INPUT_CHECK_H
#define SHMRUN_OPS_INPUT_CHECK_H

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <unistd.h>

/* "a FIFO", "a directory", ... : what @mode is, for messages about a file
 * that is not the regular file an operator or output needs. */
static inline const char *shmrun_file_kind(mode_t mode)
{
	return S_ISFIFO(mode)   ? "a FIFO"
	       : S_ISCHR(mode)  ? "a character device"
	       : S_ISBLK(mode)  ? "a block device"
	       : S_ISSOCK(mode) ? "a socket"
	       : S_ISDIR(mode)  ? "a directory"
	       : S_ISREG(mode)  ? "a regular file"
				: "not a file";
}

/*
 * The name of the pseudo file system that holds open file @fd, or NULL if it
 * is on an ordinary one (or fstatfs() fails: later reads will tell).
 */
static inline const char *shmrun_pseudo_fs(int fd)
{
	static const struct {
		unsigned long magic;
		const char *name;
	} fs[] = {
		{0x9fa0, "procfs"},	    /* PROC_SUPER_MAGIC */
		{0x62656572, "sysfs"},	    /* SYSFS_MAGIC */
		{0x64626720, "debugfs"},    /* DEBUGFS_MAGIC */
		{0x74726163, "tracefs"},    /* TRACEFS_MAGIC */
		{0x27e0eb, "cgroupfs"},	    /* CGROUP_SUPER_MAGIC */
		{0x63677270, "cgroup2fs"},  /* CGROUP2_SUPER_MAGIC */
		{0x73636673, "securityfs"}, /* SECURITYFS_MAGIC */
		{0xcafe4a11, "bpffs"},	    /* BPF_FS_MAGIC */
		{0x6165676c, "pstorefs"},   /* PSTOREFS_MAGIC */
		{0xde5e81e4, "efivarfs"},   /* EFIVARFS_MAGIC */
		{0x42494e4d, "binfmt_misc"}, /* BINFMTFS_MAGIC */
		{0x67596969, "rpc_pipefs"}, /* RPCAUTH_GSSMAGIC */
		{0x1cd1, "devpts"},	    /* DEVPTS_SUPER_MAGIC */
		{0x65735546, "fuse control"}, /* FUSE_CTL_SUPER_MAGIC */
		{0x62656570, "configfs"},   /* CONFIGFS_MAGIC */
	};
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return NULL;
	for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		if ((unsigned long)sf.f_type == fs[i].magic)
			return fs[i].name;
	return NULL;
}

/*
 * Whether regular file @fd of reported size @size holds fewer bytes than that
 * (its last byte cannot be read): a size that does not match the content.
 */
static inline int shmrun_size_overstated(int fd, off_t size)
{
	char c;

	return size > 0 && pread(fd, &c, 1, size - 1) == 0;
}

#endif
