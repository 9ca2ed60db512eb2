/*
 * tests/abi/cxx_plugin.cc: a plugin in C++11, so that the public headers are
 * known to compile as C++ (extern "C", no C-only constructs):
 * tests/integration/public_headers.sh builds it with g++ -std=c++11
 * -pedantic -Wall -Wextra -Werror -fvisibility=hidden and checks that it
 * exports shmrun_plugin with C linkage. The operator "abi_cxx_count" counts
 * records per key in key-bound state and emits the counts at end of input.
 *
 * C++11 has no designated initializers (C++20 has), so the operator table is
 * filled field by field in a function; SHMRUN_PLUGIN() takes its address.
 */
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <shmrun/job.h>
#include <shmrun/operator.h>
#include <shmrun/placement.h>
#include <shmrun/runtime.h>

namespace {

int count_process(struct shmrun_task *task, void *, const struct shmrun_record *rec)
{
	void *slot = shmrun_keyed_state(task, rec->key, rec->key_len, sizeof(uint64_t), true);

	if (!slot) {
		shmrun_task_error(task, "no memory for key-bound state");
		return -ENOMEM;
	}
	uint64_t n;
	std::memcpy(&n, slot, sizeof n);
	n++;
	std::memcpy(slot, &n, sizeof n);
	return 0;
}

int emit_one(void *arg, const void *key, uint32_t key_len, void *value)
{
	struct shmrun_task *task = static_cast<struct shmrun_task *>(arg);
	struct shmrun_record out = {};

	out.key = key;
	out.key_len = key_len;
	out.value = value;
	out.value_len = sizeof(uint64_t);
	return shmrun_emit(task, &out);
}

int count_end(struct shmrun_task *task, void *)
{
	shmrun_task_log(task, "%llu keys",
			static_cast<unsigned long long>(shmrun_keyed_state_keys(task)));
	return shmrun_keyed_state_foreach(task, emit_one, task);
}

struct shmrun_operator make_count()
{
	struct shmrun_operator op = {};

	op.size = sizeof(struct shmrun_operator);
	op.name = "abi_cxx_count";
	op.summary = "records per key";
	op.process = count_process;
	op.end_of_input = count_end;
	return op;
}

const struct shmrun_operator count_op = make_count();

} // namespace

SHMRUN_PLUGIN("abi_cxx", "0.1.0", &count_op);
