/*
 * tools/shmrun.c: the shmrun command. The command line itself is
 * shmrun_main() in the runtime library (runtime/cli.c), so that this
 * executable links libshmrun.so through its public API only, and a program
 * can embed the same command line. See docs/shmrun.1.md.
 */
#include "shmrun/runtime.h"

int main(int argc, char **argv)
{
	return shmrun_main(argc, argv);
}
