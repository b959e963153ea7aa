/* common/: status strings, option parsing, allocation, atomic output. */
#include <config.h>

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amp_alloc.h"
#include "amp_outfile.h"
#include "amp_parse.h"
#include "amp_progress.h"
#include "amp_timer.h"
#include "tap.h"

/* The allocation-failure test asks for 4 EiB on purpose: under
 * AddressSanitizer that must return NULL like libc does, not abort. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* The progress bar on a terminal (a pseudo-terminal as stderr), through
 * the callbacks a library is given: each phase is drawn at once under
 * its own name, even one that reports nothing (NCCL init), and the end
 * erases the line. */
static void test_progress_phases(void)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    int tty = -1;
    if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0 && ptsname(master))
        tty = open(ptsname(master), O_RDWR | O_NOCTTY);
    if (tty < 0) {
        skip(3, "no pseudo-terminal");
        if (master >= 0)
            close(master);
        return;
    }
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(tty, STDERR_FILENO);
    amp_progress p;
    amp_progress_begin(&p, "loading", "B", 0, 1);
    amp_progress_callback(&p, 1000, 0);
    amp_progress_phase_callback(&p, "uploading", "B", 4096);
    amp_progress_phase_callback(&p, "NCCL init", NULL, 0);
    amp_progress_end(&p);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(tty);
    char buf[1024];
    size_t n = 0;
    ssize_t got;
    fcntl(master, F_SETFL, O_NONBLOCK);
    while (n < sizeof buf - 1 && (got = read(master, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)got;
    buf[n] = 0;
    close(master);
    const char *up = strstr(buf, "\ruploading");
    ok(strstr(buf, "\rloading") != NULL && up != NULL && strstr(up, "0.0%") != NULL,
       "on a terminal, each phase drawn at once under its name, with its total's percent");
    ok(up && strstr(up, "\rNCCL init") != NULL, "... a phase with no progress of its own too");
    ok(n >= 4 && memcmp(buf + n - 4, "\r\033[K", 4) == 0, "... and the end erases the line");
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Entries in dir other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void slurp(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* Output files: nothing under the final name until commit, nothing at all
 * in the directory while writing on the unnamed (O_TMPFILE) path, the
 * named temporary file on the other (named: AMPED_OUTFILE_NAMED=1; 2: and
 * no hard links, as on vfat, so no_clobber renames without replacing). */
static void outfile_tests(int named)
{
    const char *how = named == 2 ? "named, no hard links" : named ? "named temporary" : "unnamed";
    amp_error err = {0};
    if (named)
        setenv("AMPED_OUTFILE_NAMED", named == 2 ? "2" : "1", 1);
    else
        unsetenv("AMPED_OUTFILE_NAMED");
    char dir[] = "/tmp/amped-common-XXXXXX";
    ok(mkdtemp(dir) != NULL, "%s: temp dir", how);
    char path[128], buf[64];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    amp_outfile of;
    is_int(amp_outfile_open(&of, path, &err), AMP_OK, "%s: outfile opens", how);
    if (!named && !amp_outfile_unnamed(&of)) {
        amp_outfile_abort(&of);
        skip(17, "the file system of /tmp refuses O_TMPFILE");
        rmdir(dir);
        return;
    }
    ok(amp_outfile_unnamed(&of) == !named, "%s: the path taken", how);
    amp_outfile_write(&of, "hello", 5, &err);
    ok(!file_exists(path), "%s: final name absent before commit", how);
    is_int(dir_entries(dir), named ? 1 : 0, "%s: %s file in the directory while writing",
           how, named ? "one (temporary)" : "no");
    amp_outfile_abort(&of);
    is_int(dir_entries(dir), 0, "%s: abort leaves nothing", how);
    amp_outfile_open(&of, path, &err);
    amp_outfile_write(&of, "hello", 5, &err);
    is_int(amp_outfile_commit(&of, &err), AMP_OK, "%s: commit succeeds", how);
    struct stat st;
    ok(stat(path, &st) == 0 && st.st_size == 5, "%s: committed file has the data", how);
    /* Replacing (the default) and not (no_clobber). */
    amp_outfile_open(&of, path, &err);
    amp_outfile_write(&of, "world!", 6, &err);
    is_int(amp_outfile_commit(&of, &err), AMP_OK, "%s: commit replaces a file", how);
    slurp(path, buf, sizeof buf);
    is_str(buf, "world!", "%s: with the new data", how);
    amp_outfile_open(&of, path, &err);
    of.no_clobber = 1;
    amp_outfile_write(&of, "again", 5, &err);
    is_int(amp_outfile_commit(&of, &err), AMP_ERR_IO, "%s: no_clobber: commit fails on an "
           "existing file", how);
    like(err.msg, "out.bin: already exists", "%s: and says it exists", how);
    amp_error_clear(&err);
    slurp(path, buf, sizeof buf);
    ok(strcmp(buf, "world!") == 0 && dir_entries(dir) == 1, "%s: the file is untouched, no "
       "other left", how);
    remove(path);
    amp_outfile_open(&of, path, &err);
    of.no_clobber = 1;
    amp_outfile_write(&of, "fresh", 5, &err);
    is_int(amp_outfile_commit(&of, &err), AMP_OK, "%s: no_clobber: commit makes a new file",
           how);
    slurp(path, buf, sizeof buf);
    ok(strcmp(buf, "fresh") == 0 && dir_entries(dir) == 1, "%s: with the data, no other "
       "file left", how);
    remove(path);
    is_int(amp_outfile_open(&of, dir, &err), AMP_ERR_IO, "%s: a directory as output fails", how);
    like(err.msg, "is a directory", "%s: and says it is a directory", how);
    amp_error_clear(&err);
    snprintf(path, sizeof path, "%s/no/such/dir/x.bin", dir);
    is_int(amp_outfile_open(&of, path, &err), AMP_ERR_IO, "%s: open in a missing directory "
           "fails", how);
    like(err.msg, "no/such/dir/x.bin", "%s: IO error names the file", how);
    amp_error_clear(&err);
    rmdir(dir);
    unsetenv("AMPED_OUTFILE_NAMED");
}

/* amp_outfile_check_distinct on paths that name one file in different
 * ways, and on ones that do not. */
static void distinct_tests(void)
{
    char dir[] = "/tmp/amped-distinct-XXXXXX";
    ok(mkdtemp(dir) != NULL, "distinct: temp dir");
    char in[128], hard[128], soft[128], fresh[128], dotted[128], other[128], fifo[128];
    snprintf(in, sizeof in, "%s/in.amp", dir);
    snprintf(hard, sizeof hard, "%s/hard.amp", dir);
    snprintf(soft, sizeof soft, "%s/soft.amp", dir);
    snprintf(fresh, sizeof fresh, "%s/new.json", dir);
    snprintf(dotted, sizeof dotted, "%s/./new.json", dir);
    snprintf(other, sizeof other, "%s/other.json", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    FILE *f = fopen(in, "w");
    if (f)
        fclose(f);
    ok(link(in, hard) == 0 && symlink("in.amp", soft) == 0 && mkfifo(fifo, 0600) == 0,
       "distinct: a hard link, a symlink and a FIFO");
    const char *what[3] = {"the input", "--json", "--report"};
    const int input[3] = {1, 0, 0};
    struct {
        const char *a, *b, *c;
        amp_status want;
        const char *name;
    } cases[] = {
        {in, fresh, other, AMP_OK, "three different files"},
        {in, hard, other, AMP_ERR_USAGE, "a hard link to the input"},
        {in, other, soft, AMP_ERR_USAGE, "a symlink to the input"},
        {in, fresh, dotted, AMP_ERR_USAGE, "one new file by two paths"},
        {in, fifo, fifo, AMP_ERR_USAGE, "one FIFO twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *paths[3] = {cases[i].a, cases[i].b, cases[i].c};
        amp_error err = {0};
        is_int(amp_outfile_check_distinct(paths, what, input, 3, &err), cases[i].want,
               "distinct: %s", cases[i].name);
        if (cases[i].want != AMP_OK)
            like(err.msg, "the same file as", "distinct: %s: says so", cases[i].name);
    }
    remove(in);
    remove(hard);
    remove(soft);
    remove(fifo);
    rmdir(dir);
}

/* A symlink followed (the file it names replaced, the link kept), and a
 * set placed together: none before amp_outfile_place_all, all after. */
static void place_tests(void)
{
    char dir[] = "/tmp/amped-place-XXXXXX";
    ok(mkdtemp(dir) != NULL, "place: temp dir");
    char real[128], lnk[128], a[128], b[128];
    snprintf(real, sizeof real, "%s/real", dir);
    snprintf(lnk, sizeof lnk, "%s/link", dir);
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    ok(symlink("real", lnk) == 0, "place: a dangling symlink");
    amp_error err = {0};
    amp_outfile of[3];
    amp_outfile *list[3] = {&of[0], &of[1], &of[2]};
    const char *paths[3] = {lnk, a, b};
    int opened = 1;
    for (int i = 0; i < 3; i++) {
        opened &= amp_outfile_open(&of[i], paths[i], &err) == AMP_OK &&
                  amp_outfile_write(&of[i], "data", 4, &err) == AMP_OK &&
                  amp_outfile_finish(&of[i], &err) == AMP_OK;
    }
    ok(opened, "place: three outputs written and finished");
    ok(!file_exists(real) && !file_exists(a) && !file_exists(b),
       "place: none has its name before the placing");
    is_int(amp_outfile_place_all(list, 3, &err), AMP_OK, "place: placed");
    for (int i = 0; i < 3; i++)
        amp_outfile_abort(&of[i]);
    struct stat st;
    ok(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode), "place: the symlink is kept");
    ok(file_exists(real) && file_exists(a) && file_exists(b), "place: all have their names");
    is_int(dir_entries(dir), 4, "place: no other file left");
    /* abort before the placing: nothing */
    remove(a);
    ok(amp_outfile_open(&of[0], a, &err) == AMP_OK && amp_outfile_finish(&of[0], &err) == AMP_OK,
       "place: one more finished");
    amp_outfile_abort(&of[0]);
    ok(!file_exists(a) && dir_entries(dir) == 3, "place: aborted unplaced, it leaves nothing");
    remove(real);
    remove(lnk);
    remove(b);
    rmdir(dir);
}

int main(void)
{
    amp_error err = {0};
    uint64_t u = 0;
    double d = 0;

    /* Status codes: every known code has its own text. */
    int distinct = 1;
    for (int a = 0; a <= AMP_ERR_PEER; a++)
        for (int b = a + 1; b <= AMP_ERR_PEER; b++)
            distinct &= strcmp(amp_strerror((amp_status)a), amp_strerror((amp_status)b)) != 0;
    ok(distinct, "amp_strerror gives a distinct text for each of the %d codes", AMP_ERR_PEER + 1);
    is_str(amp_strerror((amp_status)999), "unknown status code", "unknown codes are named so");
    is_int(AMP_OK, 0, "AMP_OK is zero");

    /* The first recorded failure wins. */
    AMP_FAIL(&err, AMP_ERR_IO, "first %d", 1);
    AMP_FAIL(&err, AMP_ERR_PARSE, "second");
    is_int(err.status, AMP_ERR_IO, "first failure's status kept");
    is_str(err.msg, "first 1", "first failure's message kept");
    ok(err.src_file != NULL && strstr(err.src_file, "test_common.c") && err.src_line > 0,
       "source location recorded");
    amp_error_clear(&err);
    is_int(err.status, AMP_OK, "clear resets");

    /* Integers. */
    is_int(amp_parse_u64("42", 1, 100, "--x", &u, &err), AMP_OK, "42 parses");
    is_u64(u, 42, "42 value");
    is_int(amp_parse_u64("0", 1, 100, "--x", &u, &err), AMP_ERR_USAGE, "below min refused");
    like(err.msg, "invalid value '0' for --x", "message names value and option");
    amp_error_clear(&err);
    is_int(amp_parse_u64("101", 1, 100, "--x", &u, NULL), AMP_ERR_USAGE, "above max refused");
    is_int(amp_parse_u64("-1", 0, UINT64_MAX, "--x", &u, NULL), AMP_ERR_USAGE, "negative refused");
    is_int(amp_parse_u64(" 5", 0, 9, "--x", &u, NULL), AMP_ERR_USAGE, "leading blank refused");
    is_int(amp_parse_u64("5x", 0, 9, "--x", &u, NULL), AMP_ERR_USAGE, "trailing junk refused");
    is_int(amp_parse_u64("", 0, 9, "--x", &u, NULL), AMP_ERR_USAGE, "empty refused");
    is_int(amp_parse_u64("18446744073709551616", 0, UINT64_MAX, "--x", &u, NULL), AMP_ERR_USAGE,
           "2^64 overflows");
    is_int(amp_parse_u64("18446744073709551615", 0, UINT64_MAX, "--x", &u, NULL), AMP_OK,
           "2^64-1 fits");

    /* Sizes. */
    is_int(amp_parse_size("8G", 0, UINT64_MAX, "--m", &u, NULL), AMP_OK, "8G parses");
    is_u64(u, (uint64_t)8 << 30, "8G is 8 GiB");
    is_int(amp_parse_size("3MiB", 0, UINT64_MAX, "--m", &u, NULL), AMP_OK, "3MiB parses");
    is_u64(u, (uint64_t)3 << 20, "3MiB value");
    is_int(amp_parse_size("5Q", 0, UINT64_MAX, "--m", &u, NULL), AMP_ERR_USAGE, "bad suffix");
    is_int(amp_parse_size("99999999999T", 0, UINT64_MAX, "--m", &u, NULL), AMP_ERR_USAGE,
           "suffix overflow refused");
    /* Every suffix, in either case, bare, with B and with iB; the top of
     * each, and one past it (a shift that would overflow). */
    static const struct {
        const char *text;
        uint64_t value;   /* 0: refused */
    } sizes[] = {
        {"1", 1}, {"1K", 1024}, {"1k", 1024}, {"1KB", 1024}, {"1kB", 1024}, {"1KiB", 1024},
        {"1kiB", 1024}, {"7M", UINT64_C(7) << 20}, {"7m", UINT64_C(7) << 20},
        {"7MiB", UINT64_C(7) << 20}, {"5G", UINT64_C(5) << 30}, {"5g", UINT64_C(5) << 30},
        {"5GB", UINT64_C(5) << 30}, {"3T", UINT64_C(3) << 40}, {"3t", UINT64_C(3) << 40},
        {"3TiB", UINT64_C(3) << 40}, {"0K", 0}, {"18014398509481983K", UINT64_MAX - 1023},
        {"18014398509481984K", 0}, {"17592186044415M", UINT64_MAX - ((UINT64_C(1) << 20) - 1)},
        {"17592186044416M", 0}, {"17179869183G", UINT64_MAX - ((UINT64_C(1) << 30) - 1)},
        {"17179869184G", 0}, {"16777215T", UINT64_MAX - ((UINT64_C(1) << 40) - 1)},
        {"16777216T", 0}, {"18446744073709551615", UINT64_MAX},
        {"18446744073709551616", 0}, {"1KIB", 0}, {"1Kib", 0}, {"1Kb", 0}, {"1iB", 0},
        {"1B", 0}, {"1P", 0}, {"1E", 0}, {"1KK", 0}, {"1K ", 0}, {" 1K", 0}, {"K", 0},
        {"", 0}, {"-1K", 0}, {"+1K", 0}, {"1.5G", 0}, {"0x10", 0}, {"1e3", 0},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        u = 12345;
        amp_status st = amp_parse_size(sizes[i].text, 1, UINT64_MAX, "--m", &u, NULL);
        if (sizes[i].value)
            ok(st == AMP_OK && u == sizes[i].value, "size '%s' is %" PRIu64 " (got %" PRIu64 ")",
               sizes[i].text, sizes[i].value, st == AMP_OK ? u : 0);
        else
            ok(st == AMP_ERR_USAGE, "size '%s' refused", sizes[i].text);
    }
    is_int(amp_parse_size("1K", 1025, UINT64_MAX, "--m", &u, NULL), AMP_ERR_USAGE,
           "1K below a minimum of 1025 refused");
    is_int(amp_parse_size("2K", 1, 2047, "--m", &u, NULL), AMP_ERR_USAGE,
           "2K above a maximum of 2047 refused");
    is_int(amp_parse_size("2K", 1, 2048, "--m", &u, NULL), AMP_OK, "2K at a maximum of 2048");

    /* Doubles. */
    is_int(amp_parse_double("1e-5", 0, 1, "--tol", &d, NULL), AMP_OK, "1e-5 parses");
    ok(d == 1e-5, "1e-5 value");
    is_int(amp_parse_double("nan", -1e300, 1e300, "--tol", &d, NULL), AMP_ERR_USAGE, "nan refused");
    is_int(amp_parse_double("inf", -INFINITY, INFINITY, "--tol", &d, NULL), AMP_ERR_USAGE,
           "inf refused");
    is_int(amp_parse_double("2", 0, 1, "--tol", &d, NULL), AMP_ERR_USAGE, "above max refused");
    is_int(amp_parse_double("1e999", 0, INFINITY, "--tol", &d, NULL), AMP_ERR_USAGE,
           "overflow refused");

    /* Lists and choices. */
    uint64_t list[4];
    size_t n = 0;
    is_int(amp_parse_u64_list("3,4,5", 4, 1, 10, "--dims", list, &n, NULL), AMP_OK, "list parses");
    ok(n == 3 && list[0] == 3 && list[2] == 5, "list values");
    is_int(amp_parse_u64_list("3,,5", 4, 1, 10, "--dims", list, &n, NULL), AMP_ERR_USAGE,
           "empty item refused");
    is_int(amp_parse_u64_list("1,2,3,4,5", 4, 1, 10, "--dims", list, &n, NULL), AMP_ERR_USAGE,
           "too many items refused");
    is_int(amp_parse_u64_list("1,2,", 4, 1, 10, "--dims", list, &n, NULL), AMP_ERR_USAGE,
           "trailing comma refused");
    static const char *const ch[] = {"sum", "keep", "error", NULL};
    int c = -1;
    is_int(amp_parse_choice("keep", ch, "--duplicates", &c, NULL), AMP_OK, "choice parses");
    is_int(c, 1, "choice index");
    is_int(amp_parse_choice("foo", ch, "--duplicates", &c, &err), AMP_ERR_USAGE, "bad choice");
    like(err.msg, "'sum', 'keep', 'error'", "bad choice lists the choices");
    amp_error_clear(&err);

    /* Allocation. */
    char b[32];
    is_str(amp_format_bytes(b, sizeof b, 512), "512 B", "bytes");
    is_str(amp_format_bytes(b, sizeof b, (uint64_t)3 << 29), "1.50 GiB", "GiB");
    void *p = amp_alloc(100, "x", &err);
    ok(p != NULL && ((uintptr_t)p % AMP_CACHE_LINE) == 0, "amp_alloc is cache-line aligned");
    amp_free(p);
    p = amp_alloc((size_t)1 << 62, "a test buffer", &err);
    ok(p == NULL && err.status == AMP_ERR_NOMEM, "huge amp_alloc fails with NOMEM");
    like(err.msg, "a test buffer", "NOMEM message names what was allocated");
    like(err.msg, "4.00 EiB", "NOMEM message gives the size");
    amp_error_clear(&err);
    size_t sz;
    is_int(amp_mul_size(SIZE_MAX / 2, 3, &sz, NULL), AMP_ERR_RANGE, "size overflow detected");
    uint64_t *h = amp_huge_alloc(1000 * 8, "h", &err);
    for (int i = 0; i < 1000; i++) h[i] = (uint64_t)i * 7;
    h = amp_huge_realloc(h, 1000 * 8, (size_t)5 << 20, "h", &err);
    int kept = h != NULL;
    for (int i = 0; kept && i < 1000; i++) kept = h[i] == (uint64_t)i * 7;
    ok(kept, "amp_huge_realloc keeps contents");
    amp_huge_free(h, (size_t)5 << 20);

    outfile_tests(0);
    outfile_tests(1);
    outfile_tests(2);
    distinct_tests();
    place_tests();

    double t0 = amp_now(), t1 = amp_now();
    ok(t1 >= t0 && t0 > 0, "timer is monotonic");
    test_progress_phases();
    return done_testing();
}
