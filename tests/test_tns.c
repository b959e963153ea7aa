/* The .tns text reader: values, indices, layout, errors with line numbers,
 * and results that do not depend on thread count or block boundaries. */
#include <config.h>

#include <errno.h>
#include <math.h>
#include <zlib.h>

#include "tap.h"
#include "test_util.h"

static amp_status parse(const char *text, const amp_read_opts *o, amp_coo *t, amp_error *err)
{
    amp_read_opts def;
    if (o == NULL) {
        amp_read_opts_init(&def);
        o = &def;
    }
    amp_error_clear(err);
    memset(t, 0, sizeof *t);
    amp_status rc = amp_parse_tns_buffer("t.tns", text, strlen(text), o, t, NULL, err);
    return rc;
}

/* Expect failure with status st and a message containing want. */
static void expect_error(const char *text, const amp_read_opts *o, amp_status st,
                         const char *want, const char *what)
{
    amp_coo t;
    amp_error err;
    amp_status rc = parse(text, o, &t, &err);
    if (!ok(rc == st && strstr(err.msg, want) != NULL, "%s", what))
        diag("status %d (want %d), message '%s' (want '%s')", rc, st, err.msg, want);
    amp_coo_free(&t);
}

static void test_basic(void)
{
    amp_coo t;
    amp_error err;
    is_int(parse("1 2 3 1.5\n2 3 4 -2e3\n", NULL, &t, &err), AMP_OK, "two nonzeros parse");
    ok(t.nmodes == 3 && t.nnz == 2, "3 modes, 2 nonzeros");
    ok(t.dims[0] == 2 && t.dims[1] == 3 && t.dims[2] == 4, "dims are the largest indices");
    ok(t.ind[0][0] == 0 && t.ind[1][0] == 1 && t.ind[2][1] == 3, "indices stored 0-based");
    ok(t.val[0] == 1.5 && t.val[1] == -2000, "values");
    amp_coo_free(&t);

    is_int(parse("1 2 3 # trailing comment\n4 5 6\t# another\n", NULL, &t, &err), AMP_OK,
           "trailing comments on data lines");
    ok(t.nmodes == 2 && t.nnz == 2 && t.val[0] == 3 && t.val[1] == 6, "trailing comments ignored");
    amp_coo_free(&t);

    is_int(parse("# header\r\n\r\n  \t1\t2   0.25\r\n# mid\n\n3 1 7", NULL, &t, &err), AMP_OK,
           "comments, blank lines, CRLF, tabs, no final newline");
    ok(t.nmodes == 2 && t.nnz == 2 && t.dims[0] == 3 && t.val[0] == 0.25 && t.val[1] == 7,
       "layout-tolerant parse is right");
    amp_coo_free(&t);

    is_int(parse("0 5 1\n3 0 2\n", NULL, &t, &err), AMP_OK, "0-based file parses");
    ok(t.ind[0][0] == 0 && t.ind[1][0] == 5 && t.dims[0] == 4 && t.dims[1] == 6,
       "0-based detected: indices kept, dims = max + 1");
    amp_coo_free(&t);

    amp_read_opts o;
    amp_read_opts_init(&o);
    o.index_base = 0;
    is_int(parse("1 2 1\n", &o, &t, &err), AMP_OK, "forced 0-based");
    ok(t.ind[0][0] == 1 && t.dims[0] == 2 && t.dims[1] == 3, "forced 0-based keeps indices");
    amp_coo_free(&t);
    o.index_base = 1;
    expect_error("1 2 1\n2 2 1\n5 0 1\n", &o, AMP_ERR_RANGE, "t.tns:3: index 0 in mode 2",
                 "index 0 in a forced 1-based file names line and mode");

    amp_read_opts_init(&o);
    o.ndims = 2;
    o.dims[0] = 10;
    o.dims[1] = 20;
    is_int(parse("1 2 1\n", &o, &t, &err), AMP_OK, "given dims larger than data");
    ok(t.dims[0] == 10 && t.dims[1] == 20, "given dims kept");
    amp_coo_free(&t);
    o.dims[1] = 3;
    expect_error("1 2 1\n1 9 1\n1 3 1\n", &o, AMP_ERR_RANGE, "t.tns:2: index 9 in mode 2 exceeds",
                 "index beyond a given dim names its line");
    o.ndims = 3;
    expect_error("1 2 1\n", &o, AMP_ERR_USAGE, "2 modes but 3 dimensions", "dims count mismatch");

    /* Largest index, and many modes. */
    is_int(parse("9223372036854775807 1 1\n", NULL, &t, &err), AMP_OK, "index 2^63-1 accepted");
    is_u64(t.dims[0], 9223372036854775807ULL, "dimension 2^63-1");
    amp_coo_free(&t);
    char line[1024] = "";
    for (int m = 0; m < AMP_MAX_MODES; m++)
        sprintf(line + strlen(line), "%d ", m + 1);
    strcat(line, "2.5\n");
    is_int(parse(line, NULL, &t, &err), AMP_OK, "%d modes accepted", AMP_MAX_MODES);
    ok(t.nmodes == AMP_MAX_MODES && t.dims[AMP_MAX_MODES - 1] == AMP_MAX_MODES, "all modes read");
    amp_coo_free(&t);
    char big[1200];
    snprintf(big, sizeof big, "1 %s", line);
    expect_error(big, NULL, AMP_ERR_UNSUPPORTED, "33 modes; amped supports at most 32",
                 "33 modes refused");
}

static void test_errors(void)
{
    expect_error("1 2 3 1\n1 2 1\n", NULL, AMP_ERR_PARSE,
                 "t.tns:2: expected 4 fields (3 indices and a value), found 3", "too few fields");
    expect_error("1 2 3 1\n\n1 2 3 4 5\n", NULL, AMP_ERR_PARSE, "t.tns:3: expected 4 fields",
                 "too many fields");
    expect_error("1 2 1\n1 x 1\n", NULL, AMP_ERR_PARSE,
                 "t.tns:2: field 2: 'x' is not a non-negative integer index", "non-numeric index");
    expect_error("1 2 1\n1 2.5 1\n", NULL, AMP_ERR_PARSE, "t.tns:2: field 2: '2.5' is not",
                 "fractional index");
    expect_error("1 2 1\n-1 2 1\n", NULL, AMP_ERR_PARSE, "t.tns:2: field 1: negative index '-1'",
                 "negative index");
    expect_error("1 2 1\n1 9223372036854775808 1\n", NULL, AMP_ERR_RANGE,
                 "t.tns:2: field 2: index '9223372036854775808' is larger than", "index 2^63");
    expect_error("1 2 1\n1 99999999999999999999999 1\n", NULL, AMP_ERR_RANGE,
                 "t.tns:2: field 2: index", "index beyond 2^64");
    expect_error("1 2 1\n1 2 abc\n", NULL, AMP_ERR_PARSE, "t.tns:2: field 3: value 'abc' is not a number",
                 "non-numeric value");
    expect_error("1 2 1\n1 2 1.5e\n", NULL, AMP_ERR_PARSE, "value '1.5e' is not a number",
                 "exponent without digits");
    expect_error("1 2 1\n1 2 3,5\n", NULL, AMP_ERR_PARSE, "value '3,5' is not a number",
                 "decimal comma");
    expect_error("1 2 nan\n", NULL, AMP_ERR_PARSE, "t.tns:1: field 3: value 'nan' is not finite",
                 "NaN value");
    expect_error("1 2 1\n1 2 -Infinity\n", NULL, AMP_ERR_PARSE, "t.tns:2: field 3: value '-Infinity' is not finite",
                 "infinite value");
    expect_error("1 2 1e999\n", NULL, AMP_ERR_RANGE, "field 3: value '1e999' is out of the range of a double",
                 "overflowing value, quoted");
    expect_error("1 2 # only two fields\n", NULL, AMP_ERR_PARSE, "found 2 fields",
                 "a trailing comment is not a field");
    expect_error("1 2 3 # c\n1 2 # c\n", NULL, AMP_ERR_PARSE, "t.tns:2: expected 3 fields (2 indices and a value), found 2",
                 "a comment does not stand in for the value");
    expect_error("", NULL, AMP_ERR_EMPTY, "t.tns: no nonzeros (empty input)", "empty input");
    expect_error("# a\n\n#b\n", NULL, AMP_ERR_EMPTY, "only comments", "only comments");
    expect_error("5 1.0\n", NULL, AMP_ERR_PARSE, "at least 2 indices and a value, found 2",
                 "one-mode line refused");
    expect_error("1 2 1\n\001\002\003 4 5\n", NULL, AMP_ERR_PARSE, "t.tns:2: field 1: '?\?\?'",
                 "binary junk quoted safely");
    /* A line longer than the limit. */
    size_t n = AMP_TNS_MAX_LINE + 100;
    char *s = malloc(n + 16);
    strcpy(s, "1 2 1\n1 2 ");
    memset(s + 10, '7', n);
    strcpy(s + 10 + n, "\n");
    expect_error(s, NULL, AMP_ERR_PARSE, "t.tns:2: line is longer than 65536 bytes", "long line");
    memset(s, '#', n);
    strcpy(s + n, "\n1 1 1\n");
    expect_error(s, NULL, AMP_ERR_PARSE, "t.tns:1: line is longer", "long first line");
    strcpy(s, "1 2 1\n1 2 # ");
    memset(s + 12, 'c', n);
    strcpy(s + 12 + n, "\n");
    expect_error(s, NULL, AMP_ERR_PARSE, "t.tns:2: line is longer", "long trailing comment");
    strcpy(s, "1 2 1\n# ");
    memset(s + 8, 'c', n);
    strcpy(s + 8 + n, "\n");
    expect_error(s, NULL, AMP_ERR_PARSE, "t.tns:2: line is longer", "long comment line after data");
    strcpy(s, "1 2 1\n1 2");
    memset(s + 9, ' ', n);
    strcpy(s + 9 + n, "3\n");
    expect_error(s, NULL, AMP_ERR_PARSE, "t.tns:2: line is longer", "long line of blanks that would parse");
    free(s);
}

/* Values parse to the same double as strtod, bit for bit. */
static void test_values(void)
{
    static const char *fixed[] = {
        "0", "-0", "1", "-1", "0.1", "0.5", ".5", "5.", "+3", "1e-320", "4.9e-324",
        "2.2250738585072014e-308", "1.7976931348623157e308", "9007199254740993",
        "123456789012345678901234567890", "0.000000000000000000000000000001",
        "3.141592653589793238462643383279", "1E5", "1e+5", "12345678901234567890e-10",
        "0.30000000000000004", "6.02214076e23", "-1.5e-7", "00001.2500", NULL};
    char buf[8192];
    size_t used = 0;
    int count = 0;
    for (int i = 0; fixed[i]; i++, count++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "1 %d %s\n", count + 1, fixed[i]);
    amp_coo t;
    amp_error err;
    int parsed = parse(buf, NULL, &t, &err) == AMP_OK && t.nnz == (uint64_t)count;
    ok(parsed, "edge-case values parse");
    int same = parsed;   /* nothing parsed is nothing equal */
    for (int i = 0; parsed && fixed[i]; i++) {
        double want = strtod(fixed[i], NULL);
        if (memcmp(&want, &t.val[i], 8) != 0) {
            same = 0;
            diag("'%s': got %.17g, strtod %.17g", fixed[i], t.val[i], want);
        }
    }
    ok(same, "edge-case values equal strtod bit for bit");
    amp_coo_free(&t);

    /* Random doubles in many print styles. */
    const int n = 60000;
    char *text = malloc((size_t)n * 48);
    char (*tok)[40] = malloc((size_t)n * 40);
    uint64_t seed = 12345;
    used = 0;
    for (int i = 0; i < n; i++) {
        uint64_t r = rng_next(&seed);
        double v;
        switch (i % 5) {
        case 0: /* random bit patterns, finite */
            do { r = rng_next(&seed); memcpy(&v, &r, 8); } while (!isfinite(v));
            snprintf(tok[i], 40, "%.17g", v);
            break;
        case 1: snprintf(tok[i], 40, "%.6f", (double)(r >> 11) * 0x1.0p-53 * 1000); break;
        case 2: snprintf(tok[i], 40, "%.3e", ((double)(r >> 11) - 0x1.0p52) * 1e-5); break;
        case 3: snprintf(tok[i], 40, "%llu", (unsigned long long)(r % 100000)); break;
        default: snprintf(tok[i], 40, "%.15g", (double)(r >> 11) * 0x1.0p-40); break;
        }
        used += (size_t)sprintf(text + used, "%d 1 %s\n", i + 1, tok[i]);
    }
    parsed = parse(text, NULL, &t, &err) == AMP_OK && t.nnz == (uint64_t)n;
    ok(parsed, "%d random values parse", n);
    int bad = parsed ? 0 : n;   /* nothing parsed: every value wrong */
    for (int i = 0; parsed && i < n; i++) {
        double want = strtod(tok[i], NULL);
        if (memcmp(&want, &t.val[i], 8) != 0 && bad++ < 5)
            diag("'%s': got %.17g, strtod %.17g", tok[i], t.val[i], want);
    }
    is_int(bad, 0, "random values equal strtod bit for bit");
    amp_coo_free(&t);
    free(text);
    free(tok);
}

/* A few MB of text with comments, read with several thread counts. */
static char *make_text(size_t nnz, unsigned modes, size_t *len, uint64_t seed)
{
    char *s = malloc(nnz * (modes * 8 + 32) + 64);
    size_t u = 0;
    u += (size_t)sprintf(s, "# generated\n");
    for (size_t k = 0; k < nnz; k++) {
        if (k % 997 == 0) u += (size_t)sprintf(s + u, "# comment %zu\n\n", k);
        for (unsigned m = 0; m < modes; m++)
            u += (size_t)sprintf(s + u, "%llu ", (unsigned long long)(rng_next(&seed) % 5000 + 1));
        u += (size_t)sprintf(s + u, "%.6f%s", (double)(rng_next(&seed) % 1000000) / 1e6,
                             k % 3 ? "\n" : "\r\n");
    }
    *len = u;
    return s;
}

static void test_threads_and_blocks(void)
{
    size_t len;
    char *text = make_text(150000, 4, &len, 7);
    const char *plain = write_file("big.tns", text, len);
    amp_read_opts o;
    amp_read_opts_init(&o);
    o.duplicates = AMP_DUP_KEEP;
    amp_coo ref, t;
    amp_error err = {0};
    set_threads(1);
    ok(amp_read_tensor(plain, &o, &ref, NULL, &err) == AMP_OK && ref.nnz == 150000,
       "reference read on 1 thread (%zu bytes)", len);
    for (int th = 2; th <= 7; th += 5) {
        set_threads(th);
        amp_error_clear(&err);
        ok(amp_read_tensor(plain, &o, &t, NULL, &err) == AMP_OK && coo_equal(&ref, &t),
           "%d threads give the identical tensor", th);
        amp_coo_free(&t);
    }
    /* gzip through the streaming path with tiny blocks: every line crosses
     * a block boundary at some point. */
    const char *gz = test_path("big.tns.gz");
    gzFile g = gzopen(gz, "wb1");
    gzwrite(g, text, (unsigned)len);
    gzclose(g);
    set_threads(3);
    o.block_bytes = 777;
    amp_read_info info;
    amp_error_clear(&err);
    ok(amp_read_tensor(gz, &o, &t, &info, &err) == AMP_OK && coo_equal(&ref, &t),
       "gzip, 777-byte blocks, 3 threads: identical tensor");
    ok(info.compression == AMP_COMPRESSION_GZIP && info.bytes == len, "gzip detected, all bytes");
    amp_coo_free(&t);

    /* An error deep in the file, in a later chunk, reports its exact line. */
    size_t cut = len - 200;
    while (text[cut - 1] != '\n') cut--;
    uint64_t line = 1;
    for (size_t i = 0; i < cut; i++) line += text[i] == '\n';
    text[cut] = 'Z';
    const char *bad = write_file("bad.tns", text, len);
    char want[64];
    snprintf(want, sizeof want, "bad.tns:%llu: field 1: 'Z", (unsigned long long)line);
    set_threads(2);
    amp_error_clear(&err);
    ok(amp_read_tensor(bad, &o, &t, NULL, &err) == AMP_ERR_PARSE && strstr(err.msg, want),
       "error in a late chunk names line %llu", (unsigned long long)line);
    if (!strstr(err.msg, want)) diag("message: %s (want %s)", err.msg, want);
    amp_coo_free(&t);
    amp_coo_free(&ref);
    free(text);

    /* Streaming: a line longer than the limit is refused, not buffered. */
    const char *lg = test_path("long.tns.gz");
    g = gzopen(lg, "wb1");
    gzputs(g, "1 1 1\n");
    for (int i = 0; i < 80; i++) gzputs(g, "1111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111");
    gzputs(g, "\n");
    gzclose(g);
    o.block_bytes = 4096;
    amp_error_clear(&err);
    ok(amp_read_tensor(lg, &o, &t, NULL, &err) == AMP_ERR_PARSE &&
       strstr(err.msg, "long.tns.gz:2: line is longer than 65536 bytes"),
       "streamed over-long line refused with its line number");
    if (!strstr(err.msg, "long.tns.gz:2:")) diag("message: %s", err.msg);
}

int main(void)
{
    test_basic();
    test_errors();
    test_values();
    test_threads_and_blocks();
    return done_testing();
}
