#!/usr/bin/env python3
"""amped-run's outputs read back by readers that are not amped's, for
tests/readback.sh.

  readback.py gen OUT.tns SEED [f32]
      a small tensor with structure (a rank-3 model sampled at random
      coordinates, plus noise), 1-based, with empty slices in every mode;
      with f32 every value is exactly a float (so amped-prep keeps f32).
  readback.py check TENSOR.tns PREFIX FORMAT PRECISION ROWS RUN.out RUN.json
                    FILE.amp RANK THREADS SEED TOL ITERS METHOD [L2]
      the run's factor files (FORMAT text, npy or ktensor) read with NumPy
      (np.load, allow_pickle=False, for .npy), their dtype and shape; the fit
      of the written model recomputed from the tensor as read here; the
      JSON report (json module) field by field against the printed lines,
      the options and recomputations.
  readback.py same PREFIX_A FORMAT_A PREFIX_B FORMAT_B PRECISION ROWS NMODES
      two runs' factors equal to the bit (npy against text: text is written
      with %.17g, or %.9g from f32, which both round-trip).
  readback.py other RUN.out RUN.json mttkrp-only|check ROUNDS
      the JSON of --mttkrp-only (rounds, each mode's seconds and their sum,
      as printed) or --check (each mode's error, as printed); for both no
      iterations, no final fit, not converged, every timing but load 0.
  readback.py prepstats TENSOR.tns STATS.out POLICY BASE
      amped-prep --stats's report (--duplicates POLICY, sum or keep;
      --index-base BASE, 0 or 1) recomputed from the .tns read here.
  readback.py pyttb FILE.ktn TENSOR.tns RUN.json
      pyttb.import_data reads the ktensor, and its fit (recomputed with
      numpy from pyttb's arrays) is the JSON's final fit.

Each check that fails prints one line starting 'FAIL'; the exit status is
the number of failures (0: all held), 99 for a missing module.
"""
import json
import math
import re
import sys

try:
    import numpy as np
except ImportError:
    print('NO numpy')
    sys.exit(99)

failures = 0


def fail(msg):
    global failures
    failures += 1
    print('FAIL ' + msg)


def close(a, b, tol):
    return abs(a - b) <= tol


# ---- the tensor, read here ----------------------------------------------------

def read_tns(path):
    """The .tns as amped-prep reads it by default: base 1, duplicates summed,
    dims the largest index of each mode. Returns (coords N x nnz 0-based,
    values, dims)."""
    acc = {}
    nmodes = None
    with open(path) as f:
        for line in f:
            s = line.split()
            if not s or s[0].startswith('#'):
                continue
            if nmodes is None:
                nmodes = len(s) - 1
            key = tuple(int(x) - 1 for x in s[:-1])
            acc[key] = acc.get(key, 0.0) + float(s[-1])
    keys = sorted(acc)
    coords = np.array(keys, dtype=np.int64).T
    vals = np.array([acc[k] for k in keys], dtype=np.float64)
    dims = [int(coords[m].max()) + 1 for m in range(nmodes)]
    return coords, vals, dims


def fit_of(coords, vals, lam, A):
    """1 - ||X - M|| / ||X||, sparsely: ||X||^2 - 2 <X, M> + ||M||^2, with
    ||M||^2 = lambda' (Hadamard of the Grams) lambda."""
    R = lam.shape[0]
    prod = np.ones((vals.shape[0], R))
    G = np.ones((R, R))
    for m, Am in enumerate(A):
        prod *= Am[coords[m], :]
        G *= Am.T @ Am
    inner = float(vals @ (prod @ lam))
    xx = float(vals @ vals)
    mm = float(lam @ G @ lam)
    resid = xx - 2 * inner + mm
    return 1 - math.sqrt(max(resid, 0.0)) / math.sqrt(xx)


# ---- the factors, read here ----------------------------------------------------

def load_npy(path, dtype, shape, what):
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:  # any refusal of the file is the failure
        fail('%s: np.load refuses it: %s' % (path, e))
        return None
    if a.dtype.str != dtype:
        fail('%s: dtype %s, expected %s (%s)' % (path, a.dtype.str, dtype, what))
    if a.shape != shape:
        fail('%s: shape %s, expected %s (%s)' % (path, a.shape, shape, what))
        return None
    if a.dtype.kind == 'f' and not np.all(np.isfinite(a)):
        fail('%s: values that are not finite' % path)
    return a


def read_text(path, cols, with_index):
    """A text factor file: rows of numbers (with --rows nonempty, the
    1-based index first). Returns (matrix f64, indices 0-based or None)."""
    rows, idx = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            s = line.split()
            want = cols + (1 if with_index else 0)
            if len(s) != want:
                fail('%s:%d: %d fields, expected %d' % (path, n, len(s), want))
                continue
            if with_index:
                idx.append(int(s[0]) - 1)
                s = s[1:]
            rows.append([float(x) for x in s])
    m = np.array(rows, dtype=np.float64).reshape(len(rows), cols)
    return m, (np.array(idx, dtype=np.int64) if with_index else None)


def read_ktn(path):
    """The ktensor file as pyttb's export_data writes one."""
    with open(path) as f:
        tok = f.read().split('\n')
    lines = iter(tok)
    if next(lines) != 'ktensor':
        fail('%s: does not begin with ktensor' % path)
    N = int(next(lines))
    dims = [int(x) for x in next(lines).split()]
    R = int(next(lines))
    lam = np.array([float(x) for x in next(lines).split()])
    A = []
    for m in range(N):
        if next(lines) != 'matrix' or next(lines) != '2':
            fail('%s: mode %d is not a matrix of 2 dimensions' % (path, m + 1))
        r, c = (int(x) for x in next(lines).split())
        if (r, c) != (dims[m], R):
            fail('%s: mode %d matrix %dx%d, expected %dx%d' % (path, m + 1, r, c, dims[m], R))
        A.append(np.array([[float(x) for x in next(lines).split()] for _ in range(r)]))
    return dims, lam, A


def load_model(prefix, fmt, precision, rows, nmodes, dims, nonempty, R):
    """The written model as (lambda, full factor matrices dims[m] x R, rows
    of the index files or None), each file's form checked on the way."""
    dtype = '<f4' if precision == 'f32' else '<f8'
    if fmt == 'ktensor':
        kd, lam, A = read_ktn(prefix + '.ktn')
        if kd != dims:
            fail('%s.ktn: dims %s, expected %s' % (prefix, kd, dims))
        if precision == 'f32':
            return (lam.astype(np.float32).astype(np.float64),
                    [a.astype(np.float32).astype(np.float64) for a in A])
        return lam, A
    A = []
    if fmt == 'npy':
        lam = load_npy(prefix + '.lambda.npy', dtype, (R,), 'lambda')
        for m in range(nmodes):
            shape = (dims[m], R) if rows == 'all' else (len(nonempty[m]), R)
            a = load_npy('%s.mode%d.npy' % (prefix, m + 1), dtype, shape, 'mode %d' % (m + 1))
            if a is None:
                return None, None
            a = a.astype(np.float64)
            if rows == 'nonempty':
                ix = load_npy('%s.mode%d.index.npy' % (prefix, m + 1), '<u8',
                              (len(nonempty[m]),), 'mode %d index' % (m + 1))
                if ix is None:
                    return None, None
                if not np.array_equal(ix.astype(np.int64), nonempty[m]):
                    fail('mode %d index.npy: not the nonempty indices (0-based) in order'
                         % (m + 1))
                full = np.zeros((dims[m], R))
                full[nonempty[m]] = a
                a = full
            A.append(a)
        if lam is None:
            return None, None
        return lam.astype(np.float64), A
    lam, _ = read_text(prefix + '.lambda.mat', 1, False)
    lam = lam.reshape(-1)
    if lam.shape != (R,):
        fail('lambda.mat: %d values, expected %d' % (lam.shape[0], R))
        return None, None
    for m in range(nmodes):
        a, ix = read_text('%s.mode%d.mat' % (prefix, m + 1), R, rows == 'nonempty')
        if rows == 'nonempty':
            if not np.array_equal(ix, nonempty[m]):
                fail('mode%d.mat: the indices are not the nonempty ones (1-based) in order'
                     % (m + 1))
                return None, None
            full = np.zeros((dims[m], R))
            full[nonempty[m]] = a
            a = full
        elif a.shape[0] != dims[m]:
            fail('mode%d.mat: %d rows, expected %d' % (m + 1, a.shape[0], dims[m]))
            return None, None
        A.append(a)
    if precision == 'f32':
        # Written with %.9g from a float, which a float reads back exactly.
        lam = lam.astype(np.float32).astype(np.float64)
        A = [a.astype(np.float32).astype(np.float64) for a in A]
    return lam, A


# ---- what the run printed ------------------------------------------------------

ITER_LINE = re.compile(r'^\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)$')


def parse_stdout(path):
    out = {'iters': [], 'time': {}}
    with open(path) as f:
        lines = f.read().splitlines()
    in_table = False
    for line in lines:
        if line.startswith('  iter  fit'):
            in_table = True
            continue
        if in_table:
            m = ITER_LINE.match(line)
            if m:
                out['iters'].append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
                continue
            in_table = False
        m = re.match(r'^final fit: (\S+) after (\d+) iterations? \((converged|iteration limit)\)$',
                     line)
        if m:
            out['final'] = (m.group(1), int(m.group(2)), m.group(3) == 'converged')
        m = re.match(r'^time:\s+(.*) s$', line)
        if m:
            for item in m.group(1).split(', '):
                k, v = item.split()
                out['time'][k] = v
        m = re.match(r'^loaded:\s+(\S+) s$', line)
        if m:
            out['loaded'] = m.group(1)
        m = re.match(r'^backend:\s+cpu, (\d+) threads?, precision (f32|f64)$', line)
        if m:
            out['backend'] = (int(m.group(1)), m.group(2))
        m = re.match(r'^tensor:    (.*): (\d+) modes, (\d+) nonzeros?, dims (\S+) '
                     r'\(nonempty (\S+)\), values (f32|f64), ', line)
        if m:
            out['tensor'] = {'path': m.group(1), 'modes': int(m.group(2)),
                             'nnz': int(m.group(3)),
                             'dims': [int(x) for x in m.group(4).split('x')],
                             'compact_dims': [int(x) for x in m.group(5).split('x')],
                             'values': m.group(6)}
        m = re.match(r'^(cp-als|mu|hals|ao-admm): +rank (\d+), at most (\d+) iterations?, '
                     r'tol (\S+)$', line)
        if m:
            out['plan'] = ('als' if m.group(1) == 'cp-als' else m.group(1), int(m.group(2)),
                           int(m.group(3)), float(m.group(4)))
        m = re.match(r'^ +constraints (\S+); l1 (\S+); l2 ([^;]+)(; (\d+) inner iterations, '
                     r'tol (\S+))?$', line)
        if m:
            out['rules'] = (m.group(1).split(','), [float(x) for x in m.group(2).split(',')],
                            [float(x) for x in m.group(3).split(',')])
        m = re.match(r'^ +random starting factors, seed (\d+)$', line)
        if m:
            out['seed'] = int(m.group(1))
    return out


def printed_close(json_value, printed, decimals, what):
    """A number printed with DECIMALS decimals is the JSON's, rounded."""
    if json_value is None:
        fail('%s: null in the JSON' % what)
        return
    if not close(float(printed), json_value, 0.5 * 10 ** -decimals + 1e-12):
        fail('%s: printed %s, JSON %.17g' % (what, printed, json_value))


def check(args):
    (tns, prefix, fmt, precision, rows, out_path, json_path, amp_path, rank, threads, seed,
     tol, iters, method) = args[:14]
    l2 = float(args[14]) if len(args) > 14 else 0.0
    R, threads, seed, tol, iters = int(rank), int(threads), int(seed), float(tol), int(iters)
    coords, vals, dims = read_tns(tns)
    N = len(dims)
    nonempty = [np.unique(coords[m]) for m in range(N)]
    with open(json_path) as f:
        try:
            js = json.load(f)
        except ValueError as e:
            fail('%s: not JSON: %s' % (json_path, e))
            return
    pr = parse_stdout(out_path)

    # The tensor: what amped-prep made of the .tns, recomputed here.
    t = js['tensor']
    if t['path'] != amp_path:
        fail('tensor.path %r, expected %r' % (t['path'], amp_path))
    if t['modes'] != N or t['nnz'] != vals.shape[0] or t['dims'] != dims:
        fail('tensor: modes %s nnz %s dims %s, the .tns has %d, %d, %s'
             % (t['modes'], t['nnz'], t['dims'], N, vals.shape[0], dims))
    if t['compact_dims'] != [len(x) for x in nonempty]:
        fail('tensor.compact_dims %s, the .tns has %s nonempty'
             % (t['compact_dims'], [len(x) for x in nonempty]))
    exact_f32 = np.array_equal(vals.astype(np.float32).astype(np.float64), vals)
    if t['values'] != ('f32' if exact_f32 else 'f64'):
        fail('tensor.values %s, but the values are%s all floats'
             % (t['values'], '' if exact_f32 else ' not'))
    norm = math.sqrt(float(vals @ vals))
    if not close(t['norm'], norm, 1e-12 * norm):
        fail('tensor.norm %.17g, the .tns %.17g' % (t['norm'], norm))

    # The options, as given.
    want = {'rank': R, 'backend': 'cpu', 'threads': threads, 'precision': precision,
            'seed': seed, 'tol': tol, 'max_iters': iters, 'method': method}
    for k, v in want.items():
        if js.get(k) != v:
            fail('%s: %r in the JSON, the run asked for %r' % (k, js.get(k), v))
    cons = js.get('constraints')
    wantc = ['nonneg' if method == 'mu' else 'none'] * N
    if cons != wantc:
        fail('constraints %s, expected %s' % (cons, wantc))
    if js.get('l1') != [0] * N:
        fail('l1 %s, expected zeros' % js.get('l1'))
    if js.get('l2') != [l2] * N:
        fail('l2 %s, expected %g in every mode' % (js.get('l2'), l2))
    if ('admm_inner' in js) != (method == 'ao-admm'):
        fail('admm_inner present for method %s' % method)
    # The header the run printed: the JSON's tensor and options.
    pt = pr.get('tensor')
    if pt is None:
        fail('no tensor: line printed')
    else:
        for k, v in pt.items():
            if t.get(k) != v:
                fail('tensor: line prints %s %r, the JSON has %r' % (k, v, t.get(k)))
    if pr.get('plan') != (method, R, iters, tol):
        fail('the printed plan %s, expected %s' % (pr.get('plan'), (method, R, iters, tol)))
    if pr.get('seed') != seed:
        fail('the printed seed %r, expected %d' % (pr.get('seed'), seed))
    if method == 'als':
        if 'rules' in pr:
            fail('CP-ALS prints constraints and penalties')
    elif pr.get('rules') != (js.get('constraints'), js.get('l1'), js.get('l2')):
        fail('printed constraints and penalties %s, the JSON %s'
             % (pr.get('rules'), (js.get('constraints'), js.get('l1'), js.get('l2'))))
    if pr.get('backend') != (threads, precision):
        fail('the printed backend line %s, expected %s' % (pr.get('backend'), (threads, precision)))

    # Every iteration: the printed line, delta, the stopping rule.
    its = js['iterations']
    n = len(its)
    if [i['iter'] for i in its] != list(range(1, n + 1)):
        fail('iterations numbered %s' % [i['iter'] for i in its])
    if len(pr['iters']) != n:
        fail('%d iterations printed, %d in the JSON' % (len(pr['iters']), n))
    prev = 0.0
    for k, it in enumerate(its):
        if k < len(pr['iters']):
            p = pr['iters'][k]
            printed_close(it['fit'], p[1], 10, 'iteration %d fit' % it['iter'])
            if it['delta'] is None or not close(float(p[2]), it['delta'],
                                                5e-4 * abs(it['delta']) + 1e-300):
                fail('iteration %d delta: printed %s, JSON %r' % (it['iter'], p[2], it['delta']))
            printed_close(it['seconds'], p[3], 3, 'iteration %d seconds' % it['iter'])
        if it['fit'] is None or it['delta'] is None:
            continue
        if it['delta'] != abs(it['fit'] - prev):
            fail('iteration %d: delta %.17g, |fit - previous fit| %.17g'
                 % (it['iter'], it['delta'], abs(it['fit'] - prev)))
        prev = it['fit']
        if it['iter'] < n and it['iter'] > 1 and it['delta'] < tol:
            fail('iteration %d: delta %.3g < tol %g, yet the run went on'
                 % (it['iter'], it['delta'], tol))
        ph = it['phases']
        if any(v is None or v < 0 for v in ph.values()):
            fail('iteration %d: a phase time negative or null: %s' % (it['iter'], ph))
        elif sum(ph.values()) > it['seconds'] + 1e-6:
            fail('iteration %d: phases sum to %.9f s, more than its %.9f s'
                 % (it['iter'], sum(ph.values()), it['seconds']))
    conv = js['converged']
    if conv:
        if n < 2 or its[-1]['delta'] >= tol:
            fail('converged, but the last delta %r is not below tol %g' % (its[-1]['delta'], tol))
    elif n != iters:
        fail('not converged after %d iterations of at most %d' % (n, iters))
    if 'final' not in pr:
        fail('no final fit line printed')
    else:
        printed_close(js['final_fit'], pr['final'][0], 10, 'final fit')
        if pr['final'][1] != n or pr['final'][2] != conv:
            fail('printed %d iterations, converged %s; the JSON %d, %s'
                 % (pr['final'][1], pr['final'][2], n, conv))
    if n and js['final_fit'] != its[-1]['fit']:
        fail('final_fit %r is not the last iteration\'s %r' % (js['final_fit'], its[-1]['fit']))

    # Timings: the printed line, the sums over the iterations, the total.
    tm = js['timings']
    total = tm['total']
    for k, v in tm.items():
        if v is None or v < 0:
            fail('timings.%s %r' % (k, v))
    if any(v is None for v in tm.values()):
        return
    parts = sum(v for k, v in tm.items() if k != 'total')
    if parts > total + 1e-6:
        fail('timings: the parts sum to %.9f s, more than the total %.9f s' % (parts, total))
    if sum(i['seconds'] for i in its) > total + 1e-6:
        fail('the iterations take %.9f s, more than the total %.9f s'
             % (sum(i['seconds'] for i in its), total))
    for p in its[0]['phases'] if its else []:
        s = sum(i['phases'][p] for i in its)
        if not close(s, tm[p], 1e-9 + 1e-9 * tm[p]):
            fail('timings.%s %.17g, the iterations\' %s sum to %.17g' % (p, tm[p], p, s))
    if 'loaded' in pr:
        printed_close(tm['load'], pr['loaded'], 3, 'loaded')
    if not pr['time']:
        fail('no time: line printed')
    for k, v in pr['time'].items():
        if k not in tm:
            fail('time: prints %s, which the JSON timings lack' % k)
        else:
            printed_close(tm[k], v, 3, 'time: ' + k)
    for k in ('load', 'output', 'total', 'mttkrp', 'fit', 'normalize'):
        if k not in pr['time']:
            fail('time: does not print %s' % k)
    # One process on the CPU: nothing uploaded nor exchanged; CP-ALS has
    # no update phase, the constrained methods no solve.
    zero = ['upload', 'comm', 'update' if method == 'als' else 'solve']
    for k in zero:
        if tm.get(k) != 0:
            fail('timings.%s is %r, expected 0 (%s on the CPU)' % (k, tm.get(k), method))
        if any(i['phases'].get(k, 0) != 0 for i in its):
            fail('an iteration\'s %s phase is not 0 (%s on the CPU)' % (k, method))

    # The model as written, its fit recomputed from the tensor read here.
    lam, A = load_model(prefix, fmt, precision, rows, N, dims, nonempty, R)
    if lam is None:
        return
    fit = fit_of(coords, vals, lam, A)
    # f64: the same sums in another order. f32: the MTTKRP in floats, and
    # the factors rounded to floats when written.
    ftol = 1e-9 if precision == 'f64' else 1e-6
    if not close(fit, js['final_fit'], ftol):
        fail('the written model\'s fit %.12f, the JSON\'s final fit %.12f (tolerance %g)'
             % (fit, js['final_fit'], ftol))
    if method == 'mu' and any(np.any(a < 0) for a in A):
        fail('mu: a negative factor value')
    print('fit of the written model %.12f, JSON %.12f' % (fit, js['final_fit']))


def same(args):
    pa, fa, pb, fb, precision, rows, nmodes = args
    N = int(nmodes)

    def model(prefix, fmt):
        dtype = '<f4' if precision == 'f32' else '<f8'
        if fmt == 'ktensor':
            _, lam, A = read_ktn(prefix + '.ktn')
            if precision == 'f32':
                return [x.astype(np.float32).astype(np.float64) for x in [lam] + A]
            return [lam] + A
        if fmt == 'npy':
            xs = [np.load(prefix + '.lambda.npy', allow_pickle=False)]
            xs += [np.load('%s.mode%d.npy' % (prefix, m + 1), allow_pickle=False)
                   for m in range(N)]
            for x in xs:
                if x.dtype.str != dtype:
                    fail('%s: dtype %s' % (prefix, x.dtype.str))
            if rows == 'nonempty':
                xs += [np.load('%s.mode%d.index.npy' % (prefix, m + 1), allow_pickle=False)
                       .astype(np.float64) + 1 for m in range(N)]
            return [x.astype(np.float64) for x in xs]
        lam, _ = read_text(prefix + '.lambda.mat', 1, False)
        xs = [lam.reshape(-1)]
        ix = []
        for m in range(N):
            with open('%s.mode%d.mat' % (prefix, m + 1)) as f:
                a = np.array([[float(v) for v in line.split()] for line in f])
            if rows == 'nonempty':
                ix.append(a[:, 0])
                a = a[:, 1:]
            xs.append(a)
        if precision == 'f32':
            # %.9g from a float: read back as a float, it is that float.
            xs = [x.astype(np.float32).astype(np.float64) for x in xs]
        return xs + ix

    a, b = model(pa, fa), model(pb, fb)
    if len(a) != len(b):
        fail('%d arrays against %d' % (len(a), len(b)))
        return
    for k, (x, y) in enumerate(zip(a, b)):
        what = 'lambda' if k == 0 else ('mode %d' % k if k <= N else 'mode %d index' % (k - N))
        if x.shape != y.shape:
            fail('%s: shape %s against %s' % (what, x.shape, y.shape))
        elif not np.array_equal(x, y):
            d = np.max(np.abs(x - y))
            fail('%s: %s and %s differ (by up to %.3g)' % (what, fa, fb, d))
    print('%s and %s: %d arrays equal' % (fa, fb, len(a)))


def pyttb_check(args):
    ktn, tns, json_path = args
    try:
        import pyttb as ttb
    except ImportError:
        print('NO pyttb')
        sys.exit(99)
    k = ttb.import_data(ktn)
    if not isinstance(k, ttb.ktensor):
        fail('pyttb.import_data gives a %s, not a ktensor' % type(k).__name__)
        return
    coords, vals, dims = read_tns(tns)
    if list(k.shape) != dims:
        fail('pyttb: shape %s, the tensor %s' % (k.shape, dims))
        return
    with open(json_path) as f:
        js = json.load(f)
    fit = fit_of(coords, vals, np.asarray(k.weights, dtype=np.float64),
                 [np.asarray(a, dtype=np.float64) for a in k.factor_matrices])
    ftol = 1e-9 if js['precision'] == 'f64' else 1e-6
    if not close(fit, js['final_fit'], ftol):
        fail('pyttb\'s model: fit %.12f, the JSON\'s %.12f' % (fit, js['final_fit']))
    # pyttb's own arithmetic too: its full tensor at the nonzeros.
    sub = np.asarray(coords.T[:20], dtype=int)
    full = np.array([sum(k.weights[r] * np.prod([k.factor_matrices[m][sub[i, m], r]
                                                  for m in range(len(dims))])
                         for r in range(k.ncomponents)) for i in range(sub.shape[0])])
    if hasattr(k, 'full') and max(dims) ** len(dims) <= 10 ** 6:
        dense = k.full().data
        got = np.array([dense[tuple(s)] for s in sub])
        if not np.allclose(got, full, rtol=1e-12, atol=1e-12):
            fail('pyttb\'s full() is not the model at the nonzeros')
    print('pyttb %s reads it: fit %.12f, JSON %.12f' % (ttb.__version__, fit, js['final_fit']))


def other(args):
    out_path, json_path, kind, rounds = args
    rounds = int(rounds)
    with open(json_path) as f:
        js = json.load(f)
    with open(out_path) as f:
        lines = f.read().splitlines()
    if js['iterations'] != [] or js['final_fit'] is not None or js['converged'] is not False:
        fail('%s: iterations %r, final_fit %r, converged %r'
             % (kind, js['iterations'], js['final_fit'], js['converged']))
    # Loading the file and making the start happen before either action;
    # nothing else is timed (the report's total stays 0, man page).
    for k, v in js['timings'].items():
        if k not in ('load', 'start') and v != 0:
            fail('%s: timings.%s is %r, not 0' % (kind, k, v))
    N = js['tensor']['modes']
    if kind == 'mttkrp-only':
        mk = js.get('mttkrp')
        if mk is None or 'check' in js:
            fail('mttkrp-only: no "mttkrp" object, or a "check" one')
            return
        if mk['rounds'] != rounds or js['max_iters'] != rounds:
            fail('mttkrp.rounds %r, max_iters %r; --iters %d'
                 % (mk['rounds'], js['max_iters'], rounds))
        sec = mk['mode_seconds']
        if len(sec) != N or any(v is None or v <= 0 for v in sec):
            fail('mttkrp.mode_seconds %r' % sec)
            return
        if not close(mk['seconds'], sum(sec), 1e-12 * sum(sec)):
            fail('mttkrp.seconds %r, the modes sum to %r' % (mk['seconds'], sum(sec)))
        per = [ln for ln in lines if re.match(r'^  mode \d+: \S+ s per MTTKRP', ln)]
        if len(per) != N:
            fail('%d modes printed, %d in the JSON' % (len(per), N))
        for m, ln in enumerate(per):
            printed_close(sec[m] / rounds, ln.split()[2], 6, 'mode %d per MTTKRP' % (m + 1))
        alls = [ln for ln in lines if ln.startswith('  all modes: ')]
        if len(alls) != 1:
            fail('no "all modes:" line')
        else:
            w = alls[0].split()
            printed_close(mk['seconds'] / rounds, w[2], 6, 'all modes per round')
            printed_close(mk['seconds'], w[6], 3, 'all modes in all')
    else:
        ck = js.get('check')
        if ck is None or 'mttkrp' in js:
            fail('check: no "check" object, or an "mttkrp" one')
            return
        err = ck['max_rel_err']
        printed = [ln.split()[-1] for ln in lines
                   if re.match(r'^check:     mode \d+: largest relative error ', ln)]
        if len(err) != N or len(printed) != N:
            fail('check: %d errors in the JSON, %d printed, %d modes' % (len(err), len(printed), N))
            return
        for m in range(N):
            if err[m] is None or err[m] < 0 or not close(float(printed[m]), err[m],
                                                         5e-4 * err[m] + 1e-300):
                fail('mode %d error: printed %s, JSON %r' % (m + 1, printed[m], err[m]))
        if not any(ln.startswith('check:     passed') for ln in lines):
            fail('check: no "passed" line')
    print('%s: the JSON is what was printed' % kind)


def prepstats(args):
    import os
    tns, out_path, policy, base = args
    base = int(base)
    entries = []
    with open(tns) as f:
        for line in f:
            w = line.split()
            if w and not w[0].startswith('#'):
                entries.append((tuple(int(x) - base for x in w[:-1]), float(w[-1])))
    N = len(entries[0][0])
    acc = {}
    for c, v in entries:
        acc[c] = acc.get(c, 0.0) + v
    if policy == 'sum':
        coords = list(acc)
        vals = np.array([acc[c] for c in coords])
    else:
        coords = [c for c, _ in entries]
        vals = np.array([v for _, v in entries])
    C = np.array(coords, dtype=np.int64)
    dims = [int(C[:, m].max()) + 1 for m in range(N)]
    nnz = len(coords)
    want = [
        'input:      %s (FROSTT text, %d bytes, %d-based)' % (tns, os.path.getsize(tns), base),
        'modes:      %d' % N,
        'dims:       ' + ' x '.join(str(d) for d in dims),
        'nonzeros:   %d' % nnz,
        'duplicates: %d' % (len(entries) - len(acc)),
        'density:    %.4g' % (nnz / float(np.prod(np.array(dims, dtype=np.float64)))),
        'values:     min %.6g, max %.6g, norm %.6g, explicit zeros %d, exact in f32: %s'
        % (vals.min(), vals.max(), math.sqrt(float(vals @ vals)), int(np.sum(vals == 0)),
           'yes' if np.array_equal(vals.astype(np.float32).astype(np.float64), vals) else 'no'),
    ]
    for m in range(N):
        deg = np.bincount(C[:, m], minlength=dims[m])
        want.append('mode %-2d     %d slices, %d non-empty, largest holds %d nonzeros (%.2f%%)'
                    % (m + 1, dims[m], int(np.sum(deg > 0)), int(deg.max()),
                       100.0 * deg.max() / nnz))
    with open(out_path) as f:
        got = f.read().splitlines()
    if got != want:
        for k in range(max(len(got), len(want))):
            g = got[k] if k < len(got) else '(none)'
            w = want[k] if k < len(want) else '(none)'
            if g != w:
                fail('line %d: printed %r, recomputed %r' % (k + 1, g, w))
    else:
        print('amped-prep --stats: every line as recomputed')


def gen(args):
    out, seed = args[0], int(args[1])
    f32 = len(args) > 2 and args[2] == 'f32'
    rng = np.random.default_rng(seed)
    dims = (23, 31, 17)
    R = 3
    # Indices leave out a few of every mode, so --rows nonempty differs.
    used = [rng.choice(d, d - 3, replace=False) for d in dims]
    A = [rng.random((d, R)) for d in dims]
    lines = []
    for _ in range(2500):
        c = [int(rng.choice(u)) for u in used]
        v = sum(np.prod([A[m][c[m], r] for m in range(3)]) for r in range(R))
        v = 20 * v + rng.standard_normal()
        if f32:
            v = round(v * 64) / 64 or 1 / 64
        lines.append('%d %d %d %.17g\n' % (c[0] + 1, c[1] + 1, c[2] + 1, v))
    # The largest index of every mode present, so dims are those above.
    for m in range(3):
        c = [int(used[k][0]) for k in range(3)]
        c[m] = dims[m] - 1
        lines.append('%d %d %d 0.5\n' % (c[0] + 1, c[1] + 1, c[2] + 1))
    with open(out, 'w') as f:
        f.writelines(lines)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {'check': check, 'same': same, 'pyttb': pyttb_check, 'gen': gen, 'other': other, 'prepstats': prepstats}[cmd](args)
    sys.exit(min(failures, 98))


if __name__ == '__main__':
    main()
