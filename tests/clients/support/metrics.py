"""Reading the broker's Prometheus endpoint (`metrics.listen`): one sample (`metric`), or the
whole exposition scraped and parsed (`scrape`, `parse`, `values`)."""
import re
import urllib.error
import urllib.request


def metric(port, name, default=None, **labels):
    """The value of one sample of the broker's metrics endpoint (`default`, when given, if the
    broker has no such sample yet)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    if default is not None:
        return default
    raise AssertionError(f"no sample {name}{{{want}}}")


def http(method, url, data=None, timeout=10):
    """(status, body) of one HTTP request; error statuses are returned, not raised."""
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def parse(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    samples = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(label_re.findall(m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def values(samples, name, **labels):
    """Samples of `name` whose labels include `labels`: [(labels dict, value)]."""
    want = set(labels.items())
    return [(dict(l), v) for (n, l), v in samples.items() if n == name and want <= set(l)]


def scrape(port):
    status, body = http("GET", f"http://127.0.0.1:{port}/metrics")
    assert status == 200, body
    return body
