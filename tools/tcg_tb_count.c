// SPDX-License-Identifier: MIT
/*
 * A QEMU TCG plugin that counts how often each translated block of guest
 * code runs, for scripts/guest-profile.sh: under TCG the guest kernel's own
 * instructions are most of a null job's round trip, and no guest-side
 * profiler works there (ftrace's patching soft-locks the guest), so the
 * count comes from the translator instead.
 *
 * At exit it writes one line per block start that ran, "VADDR INSNS RUNS"
 * (hex, decimal, decimal: the instructions executed from that start, and
 * how many times it ran), to the file given as out=FILE. Blocks translated
 * more than once (after a flush, or cut at another length) add up under
 * their start.
 * The counters are plain inline adds: with several vCPUs a few increments
 * can be lost, which a profile can afford.
 *
 * A program can bound what is counted with marks: `xchg %rbx, %rbx`
 * (48 87 db) does nothing and no compiler emits it. The first mark any
 * vCPU runs zeroes the counts, the second freezes them; what is written is
 * the window between them (or everything after a lone first mark, or the
 * whole run without one), every vCPU's code and not only the marking
 * program's.
 */
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

struct block {
	uint64_t vaddr;
	uint64_t insns;		/* per run */
	uint64_t runs;
	uint64_t frozen;	/* runs at the second mark */
};

struct start {
	uint64_t vaddr;
	uint64_t insns;		/* in all runs */
	uint64_t runs;
};

static GMutex lock;
static GPtrArray *blocks;
static char *out_path;
static int marks;

static const uint8_t mark_bytes[] = { 0x48, 0x87, 0xdb };

static void on_mark(unsigned int vcpu, void *unused)
{
	guint i;

	g_mutex_lock(&lock);
	for (i = 0; marks < 2 && i < blocks->len; i++) {
		struct block *b = g_ptr_array_index(blocks, i);

		if (marks == 0)
			b->runs = 0;
		else
			b->frozen = b->runs;
	}
	marks += marks < 2;
	g_mutex_unlock(&lock);
}

static bool is_mark(struct qemu_plugin_insn *insn)
{
	return qemu_plugin_insn_size(insn) == sizeof(mark_bytes) &&
	       !memcmp(qemu_plugin_insn_data(insn), mark_bytes,
		       sizeof(mark_bytes));
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b = g_new0(struct block, 1);
	size_t i;

	for (i = 0; i < qemu_plugin_tb_n_insns(tb); i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);

		if (is_mark(insn))
			qemu_plugin_register_vcpu_insn_exec_cb(
				insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->insns = qemu_plugin_tb_n_insns(tb);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
						 &b->runs, 1);
	g_mutex_lock(&lock);
	g_ptr_array_add(blocks, b);
	g_mutex_unlock(&lock);
}

static void write_counts(qemu_plugin_id_t id, void *unused)
{
	GHashTable *sum = g_hash_table_new(g_int64_hash, g_int64_equal);
	GHashTableIter it;
	gpointer key, value;
	FILE *f = fopen(out_path, "w");
	guint i;

	if (!f) {
		qemu_plugin_outs("tcg_tb_count: cannot write the out= file\n");
		return;
	}
	g_mutex_lock(&lock);
	fprintf(f, "# marks %d\n", marks);
	for (i = 0; i < blocks->len; i++) {
		struct block *b = g_ptr_array_index(blocks, i);
		struct start *s = g_hash_table_lookup(sum, &b->vaddr);
		uint64_t runs = marks == 2 ? b->frozen : b->runs;

		if (!runs)
			continue;
		if (!s) {
			s = g_new0(struct start, 1);
			s->vaddr = b->vaddr;
			g_hash_table_insert(sum, &s->vaddr, s);
		}
		s->insns += b->insns * runs;
		s->runs += runs;
	}
	g_hash_table_iter_init(&it, sum);
	while (g_hash_table_iter_next(&it, &key, &value)) {
		struct start *s = value;

		fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
			s->vaddr, s->insns, s->runs);
	}
	g_mutex_unlock(&lock);
	fclose(f);
	g_hash_table_destroy(sum);	/* the starts go with the process */
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
					   const qemu_info_t *info,
					   int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			out_path = g_strdup(argv[i] + 4);
	}
	if (!out_path) {
		fprintf(stderr, "tcg_tb_count: out=FILE is required\n");
		return -1;
	}
	blocks = g_ptr_array_new();
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, write_counts, NULL);
	return 0;
}
