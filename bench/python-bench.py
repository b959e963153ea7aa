#!/usr/bin/env python3
"""The worker of bench-python.sh: the Python package against amped-run,
amped-prep, TensorLy and pyttb (issue 41, "Speed and memory").

Every figure is taken in a fresh process: the harness starts the child,
takes its wall time from start to exit around the fork and its peak RSS
from wait4's rusage (what /usr/bin/time -v reports), and the child prints
one JSON line with what it measured inside itself. Sub-commands:

  overhead   amped-run against amped.load + amped.cp on one .amp file,
             interleaved, median of --reps each.
  fromcoo    Tensor.from_coo of a FROSTT .bin read into NumPy arrays
             against amped-prep FILE.bin -o x.amp, interleaved.
  compare    TensorLy parafac (dense), pyttb cp_als (sptensor) and
             amped.cp on .tns files, each tool in its own process.

The children (cp-child, fromcoo-child, compare-child) are this script
again. Only the standard library and NumPy are needed by the harness; the
children import amped (PYTHONPATH, AMPED_LIB), tensorly or pyttb.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

SELF = os.path.abspath(__file__)


# ---- measuring a child ------------------------------------------------------------
def measure(argv, env=None, stdout_json=False):
    """Run argv; (wall seconds from fork to exit, peak RSS bytes, the JSON
    line it printed last or None). Stops the bench on a failure."""
    out = subprocess.PIPE if stdout_json else subprocess.DEVNULL
    with tempfile.TemporaryFile() as errf:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=errf, env=env)
        # wait4 gives this child's own rusage; communicate() would reap it first.
        data = p.stdout.read() if stdout_json else b""
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        measure.cpu = ru.ru_utime + ru.ru_stime
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            errf.seek(0)
            sys.stderr.write(errf.read().decode(errors="replace"))
            sys.exit(f"python-bench: {' '.join(argv)}: exit status {p.returncode}")
    res = None
    if stdout_json:
        lines = [l for l in data.decode().splitlines() if l.startswith("{")]
        res = json.loads(lines[-1]) if lines else None
    return wall, ru.ru_maxrss * 1024, res


def proc_status():
    """VmRSS, VmHWM and RssShmem of this process, bytes."""
    out = {"RssShmem": 0}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssShmem"):
                out[k] = int(v.split()[0]) * 1024
    return out


def reset_peak():
    """Start VmHWM again from the current RSS (Linux >= 4.0); False where
    the kernel refuses, and the peak is then the process's whole peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memfd_bytes():
    """Bytes of this process's memfds (libamped builds a tensor from arrays
    into one: shmem, held in memory but not in VmRSS unless mapped)."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                total += os.stat(f"/proc/self/fd/{fd}").st_blocks * 512
        except OSError:
            pass
    return total


class Sampler:
    """The largest memory of this process seen every `every` seconds while a
    call runs in another thread (the call releases the GIL): VmRSS less its
    shmem pages (a mapped memfd's), plus the memfds' whole size."""

    def __init__(self, every=0.02):
        import threading
        self.every, self.peak, self._stop = every, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while True:
            self.peak = max(self.peak, self.now())
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.now())

    @staticmethod
    def now():
        st = proc_status()
        return st["VmRSS"] - st["RssShmem"] + memfd_bytes()


def mib(b):
    return b / 2**20


def med(xs):
    return statistics.median(xs)


def child_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    return env


# ---- a: overhead against amped-run --------------------------------------------------
def policy_env(env, policy):
    """env with OpenMP's wait policy as asked: None leaves libgomp's default
    (spinning), as a Python process gets it unless its user sets one;
    amped-run sets passive for itself (run/amped-run.c, wait_passively)."""
    e = {k: v for k, v in env.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if policy:
        e["OMP_WAIT_POLICY"] = policy
    return e


def cmd_overhead(a):
    env = child_env(a.threads)
    with tempfile.TemporaryDirectory(prefix="amped-pybench-") as tmp:
        js = os.path.join(tmp, "run.json")
        run_argv = [a.run, "-q", "--gpus", str(a.gpus), "-t", str(a.threads), "-r", str(a.rank),
                    "--iters", str(a.iters), "--tol", "0", "--json", js, a.amp]
        py_argv = [sys.executable, SELF, "cp-child", a.amp, str(a.rank), str(a.iters),
                   str(a.threads), str(a.gpus)]
        # The file in the page cache for all: none pays the disk.
        with open(a.amp, "rb") as f:
            while f.read(1 << 24):
                pass
        kinds = ["run", "py", "pyp"]
        rows = {k: [] for k in kinds}
        for rep in range(a.reps):
            for who in (kinds if rep % 2 == 0 else kinds[::-1]):
                if who == "run":
                    wall, rss, _ = measure(run_argv, policy_env(env, None))
                    with open(js) as f:
                        d = json.load(f)
                    rows[who].append(dict(wall=wall, rss=rss, total=d["timings"]["total"],
                                          load=d["timings"]["load"], fit=d["final_fit"],
                                          cpu=measure.cpu))
                else:
                    pol = "passive" if who == "pyp" else None
                    wall, rss, d = measure(py_argv, policy_env(env, pol), stdout_json=True)
                    rows[who].append(dict(wall=wall, rss=rss, total=d["total"], load=d["load"],
                                          fit=d["fit"], inproc=d["inproc"],
                                          import_s=d["import_s"], cpu=measure.cpu))
    print(f"{a.label}: rank {a.rank}, {a.iters} iterations (--tol 0), --gpus {a.gpus}, "
          f"{a.threads} threads; {a.reps} runs of each, interleaved; medians.")
    print("process wall: fork to exit (the Python process includes the interpreter's start "
          "and `import amped` with NumPy); run total: the run's own `total` (load included): "
          "amped-run's JSON, the result's `times['total']`; load + cp: amped.load + amped.cp "
          "timed inside the Python process. amped-run starts itself again with "
          "OMP_WAIT_POLICY=passive, and so does the package (d74ac6c on) where the "
          "environment sets no policy: 'unset' is then the package's default, and both rows "
          "wait passively (before d74ac6c, 'unset' spun). CPU s: the process's user + system seconds (wait4), less sensitive than wall "
          "time to other programs on the machine, but counting libgomp's spinning.")
    print()
    print("| | process wall s | run total s | min process wall s | min run total s | load s | "
          "import s | load + cp s | CPU s | peak RSS MiB | final fit |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    names = {"run": "amped-run", "py": "Python, OMP_WAIT_POLICY unset",
             "pyp": "Python, OMP_WAIT_POLICY=passive"}
    for who in kinds:
        r = rows[who]
        extra = (" | | |" if who == "run" else
                 f" | {med([x['import_s'] for x in r]):.3f} | {med([x['inproc'] for x in r]):.3f} |")
        print(f"| {names[who]} | {med([x['wall'] for x in r]):.3f} | "
              f"{med([x['total'] for x in r]):.3f} | {min(x['wall'] for x in r):.3f} | "
              f"{min(x['total'] for x in r):.3f} | {med([x['load'] for x in r]):.3f}{extra} "
              f"{med([x['cpu'] for x in r]):.3f} | "
              f"{mib(max(x['rss'] for x in r)):.0f} | {r[0]['fit']:.10f} |")
    print()
    for who in ("py", "pyp"):
        for how, f in (("medians", med), ("minima", min)):
            w_run, t_run = f([x["wall"] for x in rows["run"]]), f([x["total"] for x in rows["run"]])
            w, t = f([x["wall"] for x in rows[who]]), f([x["total"] for x in rows[who]])
            print(f"{names[who]} over amped-run, {how}: process wall {w / w_run:.4f} "
                  f"({100 * (w / w_run - 1):+.2f}%), run total {t / t_run:.4f} "
                  f"({100 * (t / t_run - 1):+.2f}%).")
        c_run, c = med([x["cpu"] for x in rows["run"]]), med([x["cpu"] for x in rows[who]])
        print(f"{names[who]} over amped-run, CPU seconds (medians): {c / c_run:.4f} "
              f"({100 * (c / c_run - 1):+.2f}%).")
    print("Target (issue 41): at most +2%.")
    for who in kinds:
        print(f"every run, {names[who]}: wall " +
              ", ".join(f"{x['wall']:.3f}" for x in rows[who]) + "; total " +
              ", ".join(f"{x['total']:.3f}" for x in rows[who]) + " s")
    fits = {x["fit"] for k in kinds for x in rows[k]}
    print(f"final fits: {'all equal' if len(fits) == 1 else 'DIFFER: ' + repr(sorted(fits))} "
          f"(same seed, same options)")


def cmd_cp_child(a):
    t0 = time.perf_counter()
    import amped
    t1 = time.perf_counter()
    t = amped.load(a.amp, threads=a.threads)
    res = amped.cp(t, a.rank, iters=a.iters, tol=0, gpus=a.gpus, threads=a.threads,
                   progress=False)
    t2 = time.perf_counter()
    print(json.dumps(dict(import_s=t1 - t0, inproc=t2 - t1, total=res.times["total"],
                          load=res.times["load"], fit=res.fit, iters=res.iters)))


# ---- b: from_coo against amped-prep ---------------------------------------------------
def read_bin(path):
    """A FROSTT binary v1 file (prep/bin_read.c): header u32 version, u32
    index bytes, u32 value bytes, u64 modes, u64 nnz; dims; values; one
    index array per mode, 1-based; little-endian. Returns (indices as one
    N x nnz array, values, dims)."""
    import numpy as np
    with open(path, "rb") as f:
        h = f.read(28)
    version, iw, vw = np.frombuffer(h, "<u4", 3)
    nmodes, nnz = (int(x) for x in np.frombuffer(h, "<u8", 2, 12))
    if version != 1 or iw not in (4, 8) or vw not in (4, 8):
        sys.exit(f"{path}: not FROSTT binary v1 (version {version}, widths {iw}/{vw})")
    itype = np.dtype("<u8" if iw == 8 else "<u4")
    dims = np.fromfile(path, itype, nmodes, offset=28).astype(np.uint64)
    off = 28 + nmodes * iw
    vals = np.fromfile(path, "<f8" if vw == 8 else "<f4", nnz, offset=off)
    off += nnz * vw
    idx = np.fromfile(path, itype, nmodes * nnz, offset=off).reshape(nmodes, nnz)
    return idx, vals, [int(d) for d in dims]


def cmd_fromcoo_child(a):
    import numpy as np
    import amped
    idx, vals, dims = read_bin(a.bin)
    if a.int64:
        idx = idx.astype(np.int64)
    base = proc_status()
    base_all = Sampler.now()
    reset = reset_peak()
    with Sampler() as smp:
        t0 = time.perf_counter()
        t = amped.Tensor.from_coo(idx, vals, shape=dims, index_base=1, threads=a.threads)
        t1 = time.perf_counter()
    after = proc_status()
    out = dict(sampled_extra=smp.peak - base_all, memfd=memfd_bytes(), nnz=int(vals.shape[0]), nmodes=int(idx.shape[0]), tensor_nnz=t.nnz,
               index_dtype=str(idx.dtype), value_dtype=str(vals.dtype),
               arrays=int(idx.nbytes + vals.nbytes),
               coord_bytes=int(idx.shape[0] * 8 * vals.shape[0]),
               rss_before=base["VmRSS"], hwm_before=base["VmHWM"], reset=reset,
               from_coo_s=t1 - t0, hwm_after=after["VmHWM"], rss_after=after["VmRSS"])
    if a.save:
        reset_peak()
        t2 = time.perf_counter()
        t.save(a.save)
        t3 = time.perf_counter()
        st = proc_status()
        out.update(save_s=t3 - t2, hwm_save=st["VmHWM"])
    print(json.dumps(out))


def cmd_fromcoo(a):
    env = child_env(a.threads)
    with tempfile.TemporaryDirectory(prefix="amped-pybench-", dir=a.workdir) as tmp:
        prep_out = os.path.join(tmp, "prep.amp")
        py_out = os.path.join(tmp, "py.amp")
        child = [sys.executable, SELF, "fromcoo-child", a.bin, str(a.threads)]
        argvs = {"prep": [a.prep, "-q", "-f", "-t", str(a.threads), "-o", prep_out, a.bin],
                 "py": child, "py64": child + ["--int64"], "save": child + ["--save", py_out]}
        with open(a.bin, "rb") as f:
            while f.read(1 << 24):
                pass
        kinds = ["prep", "py", "py64", "save"]
        rows = {k: [] for k in kinds}
        for rep in range(a.reps):
            for who in (kinds if rep % 2 == 0 else kinds[::-1]):
                wall, rss, d = measure(argvs[who], env, stdout_json=who != "prep")
                d = d or {}
                d.update(wall=wall, rss=rss)
                rows[who].append(d)
                for f in (prep_out, py_out):
                    if os.path.exists(f):
                        os.unlink(f)
    d0, d64 = rows["py"][0], rows["py64"][0]
    nnz, n, cb = d0["nnz"], d0["nmodes"], d0["coord_bytes"]
    print(f"{a.label}: {nnz:,} nonzeros, {n} modes, read from {os.path.basename(a.bin)} into "
          f"NumPy: {d0['index_dtype']} indices as the file holds them, one {n} x nnz array, "
          f"{d0['value_dtype']} values ({mib(d0['arrays']):.0f} MiB in all), and the same "
          f"indices as int64 ({mib(d64['arrays']):.0f} MiB). One copy of the coordinates at 8 "
          f"bytes an index: {mib(cb):.0f} MiB. {a.threads} threads; {a.reps} runs of each, "
          f"interleaved; medians (peaks: the largest).")
    print("s: the call alone (amped-prep: its process). process peak: the largest VmHWM of the "
          "Python process (amped-prep: wait4's ru_maxrss). extra peak RSS: the process's peak "
          "during the call less its RSS just before it (VmHWM reset through "
          "/proc/self/clear_refs" +
          ("" if d0["reset"] else ": REFUSED here, so VmHWM is the whole process's") +
          "), in MiB and in copies of the coordinates. from_coo builds the .amp in a memfd "
          "(shmem: in memory, but in RSS only where mapped): memfd is its size after the call; "
          "RSS + memfd is the largest of (VmRSS - RssShmem + the memfds' size) sampled every "
          "20 ms during the call, less the same before it. held after: RSS after the call "
          "less RSS before.")
    print()
    print("| | s | process wall s | process peak RSS MiB | extra peak RSS MiB | "
          "extra peak RSS, coordinate copies | memfd MiB | extra RSS + memfd MiB (copies) | "
          "held after MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    pr = rows["prep"]
    p_wall = med([x["wall"] for x in pr])
    print(f"| `amped-prep -t {a.threads} {os.path.basename(a.bin)} -o x.amp` | {p_wall:.3f} | "
          f"{p_wall:.3f} | {mib(max(x['rss'] for x in pr)):.0f} | | | | | |")
    fc = {}
    for who, label in (("py", f"`Tensor.from_coo`, {d0['index_dtype']} indices"),
                       ("py64", "`Tensor.from_coo`, int64 indices"),
                       ("save", f"`from_coo` + `save(x.amp)`, {d0['index_dtype']}")):
        r = rows[who]
        if who == "save":
            secs = med([x["from_coo_s"] + x["save_s"] for x in r])
            scol = f"{secs:.3f} (save {med([x['save_s'] for x in r]):.3f})"
            extra = med([max(x["hwm_after"], x["hwm_save"]) - x["rss_before"] for x in r])
            held = ""
        else:
            secs = med([x["from_coo_s"] for x in r])
            scol = f"{secs:.3f}"
            extra = med([x["hwm_after"] - x["rss_before"] for x in r])
            held = f"{mib(med([x['rss_after'] - x['rss_before'] for x in r])):.0f}"
        fc[who] = (secs, extra)
        peak = max(max(x["hwm_before"], x["hwm_after"], x.get("hwm_save", 0)) for x in r)
        both = med([x["sampled_extra"] for x in r])
        print(f"| {label} | {scol} | {med([x['wall'] for x in r]):.3f} | "
              f"{mib(peak):.0f} | {mib(extra):.0f} | {extra / cb:.2f} | "
              f"{mib(med([x['memfd'] for x in r])):.0f} | {mib(both):.0f} ({both / cb:.2f}) | "
              f"{held} |")
    print()
    for who in ("py", "py64"):
        secs, extra = fc[who]
        print(f"from_coo ({rows[who][0]['index_dtype']}) over amped-prep: {secs / p_wall:.3f} of "
              f"its wall time (target: at most 1); extra peak RSS {extra / cb:.2f} copies of the "
              f"coordinates, RSS + memfd {med([x['sampled_extra'] for x in rows[who]]) / cb:.2f} "
              f"(target: at most 1).")
    print("every run: amped-prep " + ", ".join(f"{x['wall']:.3f}" for x in pr) + " s; " +
          "; ".join(f"{who} " + ", ".join(f"{x['from_coo_s']:.3f} s/{mib(x['hwm_after'] - x['rss_before']):.0f} MiB"
                                            for x in rows[who]) for who in ("py", "py64", "save")))


# ---- c: against TensorLy and pyttb ----------------------------------------------------
def read_tns(path):
    import numpy as np
    a = np.loadtxt(path, ndmin=2)
    idx = a[:, :-1].astype(np.int64) - 1
    vals = np.ascontiguousarray(a[:, -1])
    dims = [int(d) + 1 for d in idx.max(axis=0)]
    return np.ascontiguousarray(idx), vals, dims


def cmd_compare_child(a):
    import numpy as np
    idx, vals, dims = read_tns(a.tns)
    t0 = time.perf_counter()
    if a.tool == "tensorly":
        import tensorly as tl
        from tensorly.decomposition import parafac
        tl.set_backend("numpy")
        x = np.zeros(dims)
        np.add.at(x, tuple(idx.T), vals)
    elif a.tool == "pyttb":
        import pyttb as ttb
        x = ttb.sptensor(idx, vals.reshape(-1, 1), tuple(dims))
    else:
        import amped
        x = amped.Tensor.from_coo(idx, vals, shape=dims, threads=a.threads)
    t1 = time.perf_counter()
    base = proc_status()
    reset = reset_peak()
    t2 = time.perf_counter()
    if a.tool == "tensorly":
        cpt, errs = parafac(x, a.rank, n_iter_max=a.iters, init="random", tol=0,
                            random_state=a.seed, return_errors=True)
        iters, fit = len(errs), 1 - float(errs[-1])
    elif a.tool == "pyttb":
        np.random.seed(a.seed)
        m, _, out = ttb.cp_als(x, a.rank, stoptol=0, maxiters=a.iters, init="random",
                               printitn=0)
        iters, fit = int(out["iters"]) + 1, float(out["fit"])
    else:
        init = None
        if a.same_init:
            # pyttb's draw (cp_als, init="random"), which is also TensorLy's
            # (random_state=seed): the same model after every iteration.
            np.random.seed(a.seed)
            init = [np.random.uniform(0, 1, (d, a.rank)) for d in dims]
        res = amped.cp(x, a.rank, iters=a.iters, tol=0, gpus=0, threads=a.threads,
                       seed=a.seed, init=init, progress=False)
        iters, fit = res.iters, res.fit
    t3 = time.perf_counter()
    after = proc_status()
    print(json.dumps(dict(build_s=t1 - t0, cp_s=t3 - t2, iters=iters, fit=fit,
                          rss_before=base["VmRSS"], hwm_after=after["VmHWM"], reset=reset)))


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def cmd_compare(a):
    env = child_env(a.threads)
    avail = mem_available()
    print(f"rank {a.rank}, {a.iters} iterations, no stopping rule (TensorLy tol=0 with "
          f"return_errors=True, so it computes the error each iteration as the others compute "
          f"the fit; pyttb stoptol=0; amped tol=0), random starting factors (seed {a.seed}; "
          f"each tool draws its own), {a.threads} threads (amped threads=, and "
          f"OMP/OPENBLAS_NUM_THREADS for NumPy's BLAS), each run a fresh process, median of "
          f"{a.reps} runs. TensorLy gets the dense tensor (numpy backend; its sparse input "
          f"is densified anyway), pyttb an sptensor, amped Tensor.from_coo; all from the same "
          f"arrays. s/iter: the decomposition call's wall time / iterations (its set-up "
          f"included). Peak RSS: the process's; extra: its peak during the call over its RSS "
          f"before it. OMP_WAIT_POLICY unset unless the row says so (see the overhead table). "
          f"The last amped row starts from the factors pyttb draws (np.random.seed, uniform; "
          f"TensorLy's random_state draws the same), passed as cp(init=...): its fit should "
          f"equal theirs. "
          f"Memory available now: {mib(avail):.0f} MiB.")
    print()
    print("| tensor | nnz | dims (dense MiB) | tool | s/iter | peak RSS MiB | extra MiB | "
          "final fit |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    import numpy as np
    for tns in a.tensors:
        idx, vals, dims = read_tns(tns)
        name = os.path.basename(tns)
        dense = math.prod(dims) * 8
        dcol = f"{' x '.join(map(str, dims))} ({mib(dense):,.1f})"
        for tool in ("tensorly", "pyttb", "amped", "amped-passive", "amped-init"):
            if tool == "tensorly" and 3 * dense > avail // 2:
                print(f"| {name} | {len(vals):,} | {dcol} | TensorLy | skipped: dense "
                      f"{dense / 1e9:,.3g} GB, and parafac holds about 3 dense copies, over half "
                      f"of the {avail / 1e9:.1f} GB available | | | |")
                continue
            runs = []
            for _ in range(a.reps):
                argv = [sys.executable, SELF, "compare-child", tool.split("-")[0], tns,
                        str(a.rank), str(a.iters), str(a.threads), str(a.seed)]
                if tool == "amped-init":
                    argv.append("--same-init")
                pol = "passive" if tool in ("amped-passive", "amped-init") else None
                wall, rss, d = measure(argv, policy_env(env, pol), stdout_json=True)
                d.update(wall=wall, rss=rss)
                runs.append(d)
            label = {"tensorly": "TensorLy parafac", "pyttb": "pyttb cp_als",
                     "amped": "amped.cp", "amped-passive": "amped.cp, OMP_WAIT_POLICY=passive",
                     "amped-init": "amped.cp, passive, pyttb's starting factors"}[tool]
            it = runs[0]["iters"]
            print(f"| {name} | {len(vals):,} | {dcol} | {label} | "
                  f"{med([r['cp_s'] for r in runs]) / it:.5f} | "
                  f"{mib(max(r['rss'] for r in runs)):.0f} | "
                  f"{mib(med([r['hwm_after'] - r['rss_before'] for r in runs])):.1f} | "
                  f"{med([r['fit'] for r in runs]):.8f} |")
            sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("overhead")
    s.add_argument("--run", required=True)
    s.add_argument("--amp", required=True)
    s.add_argument("--label", default="tensor")
    for k, v in (("rank", 16), ("iters", 20), ("threads", 2), ("gpus", 0), ("reps", 3)):
        s.add_argument("--" + k, type=int, default=v)
    s = sub.add_parser("cp-child")
    s.add_argument("amp")
    for k in ("rank", "iters", "threads", "gpus"):
        s.add_argument(k, type=int)
    s = sub.add_parser("fromcoo")
    s.add_argument("--prep", required=True)
    s.add_argument("--bin", required=True)
    s.add_argument("--label", default="tensor")
    s.add_argument("--workdir", default=None)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--reps", type=int, default=3)
    s = sub.add_parser("fromcoo-child")
    s.add_argument("bin")
    s.add_argument("threads", type=int)
    s.add_argument("--save")
    s.add_argument("--int64", action="store_true")
    s = sub.add_parser("compare")
    s.add_argument("tensors", nargs="+")
    for k, v in (("rank", 8), ("iters", 10), ("threads", 2), ("seed", 1), ("reps", 3)):
        s.add_argument("--" + k, type=int, default=v)
    s = sub.add_parser("compare-child")
    s.add_argument("tool", choices=("tensorly", "pyttb", "amped"))
    s.add_argument("tns")
    for k in ("rank", "iters", "threads", "seed"):
        s.add_argument(k, type=int)
    s.add_argument("--same-init", action="store_true")
    a = ap.parse_args()
    {"overhead": cmd_overhead, "cp-child": cmd_cp_child, "fromcoo": cmd_fromcoo,
     "fromcoo-child": cmd_fromcoo_child, "compare": cmd_compare,
     "compare-child": cmd_compare_child}[a.cmd](a)


if __name__ == "__main__":
    main()
