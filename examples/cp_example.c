/* The smallest use of libamped: a rank-R CP decomposition of a tensor
 * file (.amp, .tns, .tns.gz, .tns.zst or .bin), its fit and its weights.
 *
 *     cc cp_example.c $(pkg-config --cflags --libs amped) -o cp_example
 *     ./cp_example tensor.tns 8 */
#include <stdio.h>
#include <stdlib.h>

#include <amped.h>

/* Called after every iteration (and as the tensor loads): print the fit. */
static int progress(void *ctx, const amped_progress *p)
{
    (void)ctx;
    if (p->iter > 0)
        printf("iteration %u: fit %.6f\n", p->iter, p->fit);
    return 0;   /* nonzero would stop the run here */
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s TENSOR RANK\n", argv[0]);
        return 2;
    }
    amped_tensor *t = NULL;
    amped_options *o = NULL;
    amped_result *r = NULL;
    int status = EXIT_FAILURE;
    if (amped_tensor_load(argv[1], NULL, &t) != AMPED_OK ||
        amped_options_new(&o) != AMPED_OK ||
        amped_options_set(o, "rank", argv[2]) != AMPED_OK ||
        amped_options_set(o, "iters", "20") != AMPED_OK ||
        amped_cp(t, o, progress, NULL, &r) != AMPED_OK) {
        fprintf(stderr, "cp_example: %s\n", amped_last_error());
        goto done;
    }
    printf("%u modes, %llu nonzeros: fit %.6f after %u iterations on the %s\n",
           amped_tensor_nmodes(t), (unsigned long long)amped_tensor_nnz(t), amped_result_fit(r),
           amped_result_iters(r), amped_result_backend(r));
    double *w = malloc(amped_result_rank(r) * sizeof *w);
    if (w != NULL) {
        amped_result_weights(r, w);
        printf("weights:");
        for (unsigned k = 0; k < amped_result_rank(r); k++)
            printf(" %.4g", w[k]);
        printf("\n");
        free(w);
    }
    status = EXIT_SUCCESS;
done:
    amped_result_free(r);
    amped_options_free(o);
    amped_tensor_free(t);
    return status;
}
