# SPDX-License-Identifier: MIT
"""The libtpurt declarations the package calls, for cffi (ABI mode)."""

CDEF = """
struct tpurt_device;
struct tpurt_array;
struct tpurt_grid_spec;
struct tpurt_kernel;
int tpurt_open(struct tpurt_device **devp);
struct tpurt_device_info {
    char node[64];
    char driver[32];
    uint32_t hw_version;
    uint64_t hbm_size;
    uint64_t vmem_size;
    uint64_t vmem_limit;
    uint64_t smem_size;
    uint32_t cores;
    uint32_t mxu_dim;
    uint32_t mxu_count;
    uint64_t peak_flops_bf16;
    uint64_t peak_flops_f32;
    uint64_t peak_ops_int8;
    uint64_t hbm_bandwidth;
    uint64_t step_cost_ns;
    uint64_t launch_cost_ns;
    uint64_t vpu_elems_per_s;
    uint64_t eup_elems_per_s;
};
int tpurt_device_info(struct tpurt_device *dev, struct tpurt_device_info *info);
void tpurt_close(struct tpurt_device *dev);
const char *tpurt_last_error(void);
int tpurt_array_create(struct tpurt_device *dev, int dtype, int rank,
                       const int64_t *shape, struct tpurt_array **arrayp);
void tpurt_array_free(struct tpurt_array *a);
int tpurt_array_write(struct tpurt_array *a, const void *src);
int tpurt_array_read(const struct tpurt_array *a, void *dst);
uint16_t tpurt_f32_to_bf16(float f);
float tpurt_bf16_to_f32(uint16_t h);
struct tpurt_block_spec {
    int rank;
    int64_t shape[4];
    const char *index_map;
    int memory_space;
    int buffer_count;
    unsigned int element_dims;
    int64_t element_pad[4];
    int revisit;
};
int tpurt_grid_spec_create(int rank, const int64_t *grid, struct tpurt_grid_spec **gsp);
void tpurt_grid_spec_free(struct tpurt_grid_spec *gs);
int tpurt_grid_spec_set_index_names(struct tpurt_grid_spec *gs, const char *names);
int tpurt_grid_spec_add_scalar_prefetch_shaped(struct tpurt_grid_spec *gs, const char *name,
                                               int rank, const int64_t *shape);
int tpurt_grid_spec_add_input(struct tpurt_grid_spec *gs, const char *name,
                              const struct tpurt_block_spec *spec);
int tpurt_grid_spec_add_output(struct tpurt_grid_spec *gs, const char *name,
                               const struct tpurt_block_spec *spec);
int tpurt_grid_spec_set_dtype(struct tpurt_grid_spec *gs, const char *name, int dtype);
int tpurt_grid_spec_add_scratch(struct tpurt_grid_spec *gs, const char *name, int space,
                                int dtype, int rank, const int64_t *shape);
struct tpurt_alias { int input; int output; };
struct tpurt_compiler_params {
    const char *dimension_semantics;
    uint64_t vmem_limit_bytes;
    unsigned int flags;
    uint32_t timeout_ms;
    const struct tpurt_alias *input_output_aliases;
    int num_aliases;
};
int tpurt_kernel_create(struct tpurt_kernel **kp);
void tpurt_kernel_free(struct tpurt_kernel *k);
int tpurt_kernel_stmt(struct tpurt_kernel *k, const struct tpurt_grid_spec *gs, const char *text);
int tpurt_kernel_run_scoped(struct tpurt_kernel *k, const char *name, int space, int dtype,
                            int rank, const int64_t *shape);
int tpurt_kernel_end_scoped(struct tpurt_kernel *k);
int tpurt_kernel_when(struct tpurt_kernel *k, const char *pred);
int tpurt_kernel_end_when(struct tpurt_kernel *k);
int tpurt_kernel_loop(struct tpurt_kernel *k, const char *lo, const char *hi);
int tpurt_kernel_while(struct tpurt_kernel *k, const char *cond, int64_t max_trips);
int tpurt_kernel_end_loop(struct tpurt_kernel *k);
int tpurt_array_load_npy(struct tpurt_device *dev, const char *path, int as_bf16,
                         struct tpurt_array **arrayp);
int tpurt_array_save_npy(const struct tpurt_array *a, const char *path);
struct tpurt_job_error {
    uint32_t code;
    int32_t operand;
    int32_t op;
    int64_t step;
    int64_t block[4];
    uint64_t need, limit;
};
struct tpurt_job_stats {
    uint64_t steps;
    uint64_t blocks_fetched;
    uint64_t blocks_skipped;
    uint64_t blocks_written;
    uint64_t hbm_bytes_in;
    uint64_t hbm_bytes_out;
    uint64_t mxu_flops;
    uint32_t cores_used;
    uint64_t device_wall_ns;
    uint64_t call_wall_ns;
    uint64_t model_time_ps;
    uint64_t model_mxu_busy_ps;
    uint64_t model_dma_busy_ps;
    uint64_t model_bubble_ps;
    struct tpurt_job_error error;
    uint64_t loop_trips;
};
int tpurt_pallas_call(const struct tpurt_kernel *k, const struct tpurt_grid_spec *gs,
                      const struct tpurt_compiler_params *params,
                      struct tpurt_array *const *args, int nargs,
                      struct tpurt_job_stats *stats);
"""
