"""Every ```python block of README.md and docs/ runs as written (sybil; conventions in
tests/docs/blocks.py): page by page, top to bottom, one namespace per page, in a fresh
directory; and again in the same directory, as a reader who runs a page twice would."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.blocks import PAGES, ROOT, blocks, close_inboxes, parse, run, skip_directives
from tests.support.jetstream import Stream
from tests.support.otel import forget_global_provider

REDIS_PREFIX = re.compile(r'PREFIX = f"([^"{]+)')
"""A Redis claims page's prefix, up to the run's own part: what a run of the page writes."""
NATS_STREAM = re.compile(r'StreamConfig\(name="([^"]+)"')
"""A JetStream page's streams: made by its blocks on the test NATS, deleted after its runs."""
BROKERS = {
    "rabbitmq_url": ("RabbitMQDestination(", "RabbitMQConsumer("),
    "nats_url": ("JetStreamDestination(", "JetStreamConsumer("),
}
"""A page that publishes to or consumes from a broker runs on the test broker (`RABBITMQ_URL`,
`NATS_URL`), by the fixture that finds it: marked as that fixture's tests are."""


def _brokers(text: str) -> list[str]:
    return [fixture for fixture, names in BROKERS.items() if any(n in text for n in names)]


def _marks(page: Path) -> list[pytest.MarkDecorator]:
    text = page.read_text()
    marks = [pytest.mark.redis] if "hookinbox.claims" in text else []
    return marks + [getattr(pytest.mark, f.removesuffix("_url")) for f in _brokers(text)]


RUNNABLE = [
    # A Redis claims page runs its blocks on the test Redis, a broker page on its broker.
    pytest.param(page, marks=marks) if (marks := _marks(page)) else page
    for page in PAGES
    if any(blocks(parse(page)))
]


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.fixture
def page_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the pages' mkdtemp() too
    monkeypatch.delenv("HOOKINBOX_DATABASE_URL", raising=False)
    yield tmp_path
    assert Path.cwd() == tmp_path, "a block changed the working directory"


@pytest.mark.parametrize("page", RUNNABLE, ids=_page_id)
def test_every_python_block_runs(
    page: Path,
    page_directory: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    text = page.read_text()
    prefixes = set(REDIS_PREFIX.findall(text))
    redis_url = ""
    if "hookinbox.claims" in text:  # a Redis claims page: its blocks run on the test Redis
        redis_url = request.getfixturevalue("redis_url")
        monkeypatch.setenv("REDIS_URL", redis_url)
        request.addfinalizer(lambda: _delete_keys(redis_url, prefixes))
    for fixture in _brokers(text):
        url = request.getfixturevalue(fixture)
        monkeypatch.setenv(fixture.removesuffix("_url").upper() + "_URL", url)
    if redis_url:  # whatever a crashed run left, gone; the second run finds the first's keys
        _delete_keys(redis_url, prefixes)
    if "nats_url" in _brokers(text):  # a JetStream page: the streams it makes are removed
        nats_url = request.getfixturevalue("nats_url")
        streams = NATS_STREAM.findall(text)
        request.addfinalizer(lambda: _delete_streams(nats_url, streams))
        _delete_streams(nats_url, streams)
    for attempt in ("first run", "second run, same directory and Redis"):
        document = parse(page)
        try:
            done = run(document)
        except BaseException as error:
            error.add_note(f"({attempt})")
            raise
        finally:
            close_inboxes(document.namespace)
            if "set_tracer_provider" in text:  # a process sets its provider once: undo it
                forget_global_provider()
        accounted = sorted(done.ran + [line for line, _ in done.skipped])
        assert accounted == [block.line for block in blocks(document)]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_skipped_block_says_why(page: Path) -> None:
    for line, action, reason in skip_directives(parse(page)):
        assert action == "next", f"{_page_id(page)}:{line}: skip one block at a time"
        assert reason and reason.strip().startswith('"'), (
            f'{_page_id(page)}:{line}: write <!-- skip: next "why it cannot run here" -->'
        )


def test_python_is_fenced_as_python() -> None:
    """A block of Python fenced ```text would escape the run: only the few marked ones may."""
    python_like = re.compile(r"^(from \S+ import |import \S+$|@\w[\w.]*\(|def \w+\()", re.MULTILINE)
    offenders = []
    for page in PAGES:
        for number, (language, body) in enumerate(_fenced(page.read_text()), 1):
            if language != "python" and python_like.search(body):
                offenders.append(f"{_page_id(page)}: block {number} ({language or 'no language'})")
    assert offenders == []


def _fenced(text: str) -> Iterator[tuple[str, str]]:
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        yield match[1], match[2]


def _delete_keys(redis_url: str, prefixes: set[str]) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for prefix in prefixes:
            keys = list(client.scan_iter(match=f"{prefix}*"))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


def _delete_streams(nats_url: str, names: list[str]) -> None:
    for name in names:
        Stream(nats_url, name, "").delete()


def test_the_pages_run_where_the_tests_expect() -> None:
    """The runner finds the pages (a moved docs/ would otherwise pass by running nothing)."""
    assert ROOT / "README.md" in RUNNABLE
    assert len(RUNNABLE) >= 20
    assert os.path.isdir(ROOT / "docs" / "sources")
