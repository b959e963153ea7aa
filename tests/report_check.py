#!/usr/bin/env python3
"""Checks of the HTML reports and the ktensor file, for tests/reports.sh.

  report_check.py run PAGE.html RUN.json        amped-run --report against --json
  report_check.py prep PAGE.html TENSOR.tns [INFO.txt]
                                                 amped-prep --report against the
                                                 tensor itself and amped-run --info
  report_check.py ktensor FILE.ktn PREFIX        the ktensor file against -o's text files
  report_check.py starts PAGE.html RUN.json     amped-run --starts/--ranks --report: fit and
                                                 FMS against rank, recomputed from the
                                                 JSON's models

Each check that fails prints one line starting 'FAIL'; the exit status is
the number of failures (0: all held). The numbers are compared exactly: the
page writes every plotted value with %.17g, as the JSON does, and the
reference values here are computed in the same order of operations.
"""
import json
import sys
import xml.etree.ElementTree as ET

SVG = '{http://www.w3.org/2000/svg}'
XHTML = '{http://www.w3.org/1999/xhtml}'
failures = 0


def fail(msg):
    global failures
    failures += 1
    print('FAIL ' + msg)


def load_page(path):
    """The page parsed as XML (a parse error is a failure of its own), and
    the checks that it needs nothing outside its file."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        fail('%s is not well-formed XML: %s' % (path, e))
        sys.exit(failures)
    for el in root.iter():
        tag = el.tag.split('}')[-1]
        if tag in ('script', 'link', 'img', 'iframe', 'object', 'embed', 'image', 'use'):
            fail('%s: a <%s> element (the page must need nothing outside it)' % (path, tag))
        for k in el.attrib:
            if k.split('}')[-1] in ('src', 'href'):
                fail('%s: a %s attribute on <%s>' % (path, k, tag))
        if tag == 'style' and ('url(' in (el.text or '') or '@import' in (el.text or '')):
            fail('%s: the style fetches something' % path)
    return root


def chart(root, cid):
    for el in root.iter(SVG + 'svg'):
        if el.get('id') == cid:
            return el
    fail('no chart with id %s' % cid)
    return None


def charts(root):
    return {el.get('id') for el in root.iter(SVG + 'svg')}


def points(svg, series=None):
    out = []
    for g in svg.iter(SVG + 'g'):
        if g.get('class') == 'series' and (series is None or g.get('data-name') == series):
            out += [(float(c.get('data-x')), float(c.get('data-y'))) for c in g.iter(SVG + 'circle')]
    return out


def bars(svg):
    """{category: {series: value}} in the chart's order of categories."""
    out = {}
    order = []
    for g in svg.iter(SVG + 'g'):
        if g.get('class') == 'category':
            cat = g.get('data-category')
            order.append(cat)
            out[cat] = {r.get('data-series'): float(r.get('data-value'))
                        for r in g.iter(SVG + 'rect')}
    return order, out


def ref_line(svg):
    for el in svg.iter(SVG + 'line'):
        if el.get('class') == 'ref':
            return float(el.get('data-value'))
    return None


def expect(what, got, want):
    if got != want:
        fail('%s: page has %r, expected %r' % (what, got, want))


def table(root, tid):
    for el in root.iter(XHTML + 'table'):
        if el.get('id') == tid:
            return el
    fail('no table with id %s' % tid)
    return None


def check_run(page, js):
    root = load_page(page)
    j = json.load(open(js))
    its = j['iterations']
    ids = charts(root)
    svg = chart(root, 'fit-iteration')
    if svg is not None:
        expect('fit per iteration', points(svg), [(float(i['iter']), i['fit']) for i in its])
    svg = chart(root, 'fit-time')
    if svg is not None:
        clock, want = 0.0, []
        for i in its:
            clock += i['seconds']
            want.append((clock, i['fit']))
        expect('fit against time', points(svg), want)
    svg = chart(root, 'phases')
    if svg is not None:
        order, got = bars(svg)
        expect('phase chart categories', order, [str(i['iter']) for i in its])
        names = [p for p in its[0]['phases']] if its else []
        shown = [p for p in names if any(i['phases'][p] != 0 for i in its)]
        for i in its:
            expect('iteration %d phases' % i['iter'], got.get(str(i['iter'])),
                   {p: i['phases'][p] for p in shown})
    t = table(root, 'timings')
    if t is not None:
        tm = j['timings']
        keys = ['load', 'upload', 'start', 'mttkrp', 'gram', 'solve', 'normalize', 'fit', 'comm',
                'update', 'output', 'total']
        expect('timings', [float(td.get('data-value')) for td in t.iter(XHTML + 'td')],
               [tm[k] for k in keys])
    s = table(root, 'summary')
    if s is not None:
        fits = [float(td.get('data-value')) for td in s.iter(XHTML + 'td') if td.get('data-value')]
        expect('final fit', fits, [j['final_fit']] if j['final_fit'] is not None else [])
        text = ''.join(s.itertext())
        for word in [j['tensor']['path'], str(j['tensor']['nnz']), j['backend'],
                     ' \u00d7 '.join(str(d) for d in j['tensor']['dims'])]:
            if word not in text:
                fail('summary lacks %r' % word)
    gpus = j.get('gpus', [])
    if len(gpus) > 1:
        G, N = len(gpus), j['tensor']['modes']
        svg = chart(root, 'gpu-times')
        if svg is not None:
            order, got = bars(svg)
            for m in range(N):
                for g in gpus:
                    cat = 'm%d g%d' % (m + 1, g['device'])
                    expect(cat + ' times', got.get(cat),
                           {'mttkrp': g['mttkrp'][m], 'nccl': g['comm'][m],
                            'exchange': g['exchange'][m], 'idle': g['idle'][m]})
        svg = chart(root, 'gpu-balance')
        if svg is not None:
            order, got = bars(svg)
            for m in range(N):
                mean = 0.0
                for g in gpus:
                    mean += g['nnz'][m] / G
                for g in gpus:
                    cat = 'm%d g%d' % (m + 1, g['device'])
                    expect(cat + ' balance', got.get(cat),
                           {'nonzeros / mean': g['nnz'][m] / mean if mean > 0 else 0.0})
            expect('balance mean line', ref_line(svg), 1.0)
    else:
        for cid in ('gpu-times', 'gpu-balance'):
            if cid in ids:
                fail('chart %s on a run of %d GPUs' % (cid, len(gpus)))
    procs = j.get('processes', [])
    if procs:
        t = table(root, 'processes')
        if t is not None:
            rows = [tr for tr in t.iter(XHTML + 'tr') if tr.find(XHTML + 'td') is not None]
            expect('process rows', len(rows), len(procs))
            for tr, q in zip(rows, procs):
                vals = [float(td.get('data-value')) for td in tr.iter(XHTML + 'td')
                        if td.get('data-value')]
                expect('process %d' % q['process'], vals, [q['mttkrp'], q['exchange'], q['wait']])
        svg = chart(root, 'process-times')
        if svg is not None:
            order, got = bars(svg)
            expect('process chart', [got[c] for c in order],
                   [{'mttkrp': q['mttkrp'], 'exchange': q['exchange'], 'wait': q['wait']}
                    for q in procs])
    elif 'process-times' in ids:
        fail('a process chart on a run of one process')


def read_tns(path):
    """Each mode's slices and their nonzeros; a repeated coordinate is one
    nonzero, as amped-prep sums repeats by default."""
    coords = set()
    for line in open(path):
        f = line.split()
        if f and not f[0].startswith('#'):
            coords.add(tuple(f[:-1]))
    idx = [dict() for _ in next(iter(coords))]
    for c in coords:
        for m, i in enumerate(c):
            idx[m][i] = idx[m].get(i, 0) + 1
    return idx


def degree_bin(d):
    """Degrees 1-7 a bin each, then 4 bins to each doubling: written from
    the definition (the leading bit and the two after it), not from the C."""
    if d < 8:
        return d - 1, d, d
    e = d.bit_length() - 1
    q = (d >> (e - 2)) & 3
    lo = (4 + q) << (e - 2)
    return 7 + 4 * (e - 3) + q, lo, lo + (1 << (e - 2)) - 1


def check_prep(page, tns, info=None):
    root = load_page(page)
    degrees = read_tns(tns)
    nnz = sum(degrees[0].values())
    svg = chart(root, 'degrees')
    if svg is not None:
        for m, slices in enumerate(degrees):
            bins = {}
            for d in slices.values():
                b, lo, hi = degree_bin(d)
                c = bins.setdefault(b, [0, 0, hi - lo + 1])
                c[0] += 1
                c[1] += d
            want = [(c[1] / c[0], c[0] / c[2]) for b, c in sorted(bins.items())]
            expect('mode %d degrees' % (m + 1), points(svg, 'mode %d' % (m + 1)), want)
    ids = charts(root)
    if info is None:
        if any(i.startswith('shards-') for i in ids):
            fail('shard charts without an .amp file')
        return
    spans = []
    for line in open(info):
        if line.startswith('mode ') and 'nonzeros per shard' in line:
            w = line.split()
            shards = int(w[2])
            lo, hi = int(w[7]), int(w[9])
            spans.append((shards, lo, hi))
    expect('modes in --info', len(spans), len(degrees))
    for m, (shards, lo, hi) in enumerate(spans):
        svg = chart(root, 'shards-mode%d' % (m + 1))
        if svg is None:
            continue
        order, got = bars(svg)
        vals = [got[c]['nonzeros'] for c in order]
        expect('mode %d mean line' % (m + 1), ref_line(svg), nnz / shards)
        expect('mode %d fullest shard (against --info)' % (m + 1), max(vals), float(hi))
        if shards <= 1024:
            expect('mode %d shards' % (m + 1), len(vals), shards)
            expect('mode %d nonzeros over the shards' % (m + 1), sum(vals), float(nnz))
            expect('mode %d emptiest shard (against --info)' % (m + 1), min(vals), float(lo))
            expect('mode %d shard order' % (m + 1), order, [str(s) for s in range(shards)])
        else:
            expect('mode %d bars' % (m + 1), len(vals), 1024)
            expect('mode %d fullest first' % (m + 1), vals, sorted(vals, reverse=True))


def check_ktensor(path, prefix):
    lines = open(path).read().split('\n')
    expect('last byte', lines[-1], '')
    lines = lines[:-1]
    expect('line 1', lines[0], 'ktensor')
    n = int(lines[1])
    dims = [int(x) for x in lines[2].split()]
    expect('dimensions on line 3', len(dims), n)
    rank = int(lines[3])
    weights = [float(x) for x in lines[4].split()]
    want = [float(x) for x in open(prefix + '.lambda.mat').read().split()]
    expect('weights against PREFIX.lambda.mat', weights, want)
    at = 5
    for m in range(n):
        expect('mode %d header' % (m + 1), lines[at:at + 3], ['matrix', '2', '%d %d' % (dims[m], rank)])
        at += 3
        rows = [[float(x) for x in l.split()] for l in lines[at:at + dims[m]]]
        want = [[float(x) for x in l.split()]
                for l in open('%s.mode%d.mat' % (prefix, m + 1)).read().split('\n') if l]
        expect('mode %d rows against PREFIX.mode%d.mat' % (m + 1, m + 1), rows, want)
        at += dims[m]
    expect('lines', at, len(lines))


def check_starts(page, js):
    """amped-run --starts/--ranks --report: the chart of fit and FMS against
    rank and the table, against per-rank numbers recomputed here from the
    JSON's models (each final fit and FMS against its rank's best)."""
    root = load_page(page)
    j = json.load(open(js))
    models = j['models']
    K = j['batch']['starts']
    want = []
    for r in sorted({m['rank'] for m in models}):
        at = [m for m in models if m['rank'] == r]
        fits = [m['final_fit'] for m in at]
        b = fits.index(max(fits))   # the first of equal best fits, as amped-run takes it
        fms = sorted(m['fms'] for i, m in enumerate(at) if i != b)
        n = len(fms)
        med = (fms[n // 2] if n % 2 else (fms[n // 2 - 1] + fms[n // 2]) / 2) if n else None
        want.append((float(r), max(fits), min(fits), fms[0] if n else None, med))
    svg = chart(root, 'starts-rank')
    if svg is not None:
        expect('best fit against rank', points(svg, 'best fit'), [(w[0], w[1]) for w in want])
        expect('worst fit against rank', points(svg, 'worst fit'), [(w[0], w[2]) for w in want])
        if K > 1:
            expect('median FMS against rank', points(svg, 'FMS median'),
                   [(w[0], w[4]) for w in want])
            expect('lowest FMS against rank', points(svg, 'FMS min'),
                   [(w[0], w[3]) for w in want])
        else:
            expect('no FMS with one start', points(svg, 'FMS median'), [])
    t = table(root, 'ranks')
    if t is not None:
        rows = [[float(td.get('data-value')) for td in tr.iter(XHTML + 'td') if td.get('data-value')]
                for tr in t.iter(XHTML + 'tr')]
        expect('the ranks table', [r for r in rows if r],
               [[w[0], w[1], w[2]] + ([w[3], w[4]] if K > 1 else []) for w in want])


if __name__ == '__main__':
    what = sys.argv[1]
    if what == 'run':
        check_run(sys.argv[2], sys.argv[3])
    elif what == 'prep':
        check_prep(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif what == 'ktensor':
        check_ktensor(sys.argv[2], sys.argv[3])
    elif what == 'starts':
        check_starts(sys.argv[2], sys.argv[3])
    else:
        sys.exit('usage: report_check.py run|prep|ktensor|starts ...')
    sys.exit(min(failures, 100))
