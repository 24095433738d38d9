"""``scrapy forget``: a shared crawl's keys removed from a real redis-server, and only its keys."""

from __future__ import annotations

import json
import math

import pytest
import redis

from focused import forget
from focused.distributed import _check_budget, check_url, take_back_budget
from focused.errors import counted
from focused.sqlitestore import SqliteStore
from tests import test_commands, test_redis_frontier
from tests.conftest import BIRD_SEED, REPO, run_crawl
from tests.sites import self_signed_certificate
from tests.test_commands import Result, ok, one_line_error, unwritable_output
from tests.test_frontier_limits import left_out_by_max_depth_1
from tests.test_redis_frontier import (
    RedisServer,
    arguments,
    command_calls,
    crawl_by_two_processes,
    free_port,
)

cli, redis_server = test_commands.cli, test_redis_frontier.redis_server  # their fixtures

ORDER = json.dumps({"strategy": "bfs", "params": {}, "topic": "birds", "language": "en"})


def keys_under(client: redis.Redis, prefix: str) -> dict[bytes, bytes]:
    """Each key whose name starts with ``prefix``, with its value as DUMP gives it."""
    return {key: client.dump(key) for key in client.scan_iter(match=prefix + "*")}


def copy_crawl(client: redis.Redis, source: str, targets: list[str]) -> None:
    """The keys of crawl ``source`` copied to each of crawls ``targets``, without expiry."""
    prefix = f"focused:{source}:".encode()
    for key in list(client.scan_iter(match=prefix + b"*")):
        value = client.dump(key)
        for target in targets:
            client.restore(f"focused:{target}:".encode() + key[len(prefix) :], 0, value)


def test_a_finished_crawl_loses_every_key_and_crawls_nested_in_it_none(
    tmp_path,
    site,
    redis_server,
    cli,
):
    # A shared crawl left its keys in Redis once finished, and nothing removed them: a user had
    # to guess their names for `redis-cli del`, and `focused:a:*` takes those of crawl a:b too.
    settings = {
        "FOCUSED_FRONTIER": redis_server.url,
        "CLOSESPIDER_PAGECOUNT": 8,
        "MAX_PAGES_PER_HOST": 100,
    }
    crawl = run_crawl(tmp_path, arguments(site, "rank_semantic"), settings, crawl_id="a")
    assert crawl.result.returncode == 0, crawl.result.stderr[-3000:]
    assert crawl.crawl_record()["status"] == "finished"
    client = redis.Redis.from_url(redis_server.url)
    # Crawls whose ids begin with a's: a:b and a:polite nested in it (a:polite's keys look like
    # a's leases of hosts), ab beside it; and a key of some other program.
    copy_crawl(client, "a", ["a:b", "a:polite", "ab"])
    client.set("focused:a", "not a crawl's")
    others = {
        key: value
        for key, value in keys_under(client, "").items()
        if not key.startswith(b"focused:a:")
        or key.startswith((b"focused:a:b:", b"focused:a:polite:"))
    }
    own = set(keys_under(client, "")) - set(others)
    # The crawl's key families: its frontier, seen set, counters, budget, fingerprints...
    names = {key.removeprefix(b"focused:a:").split(b":")[0] for key in own}
    assert {b"order", b"seen", b"frontier", b"counters", b"near", b"rank", b"host_pages"} <= names

    result = cli("forget", "a", settings={"FOCUSED_FRONTIER": redis_server.url, **db(crawl)})
    assert ok(result) == f"removed {len(own)} keys of crawl a from {redis_server.url}\n"
    assert keys_under(client, "") == others

    one_line_error(
        cli("forget", "a", settings={"FOCUSED_FRONTIER": redis_server.url, **db(crawl)}),
        1,
        f"no keys of crawl a on {redis_server.url}: nothing to remove",
    )
    # a:b is in no store: nothing says it finished.
    nested = cli("forget", "a:b", settings={"FOCUSED_FRONTIER": redis_server.url, **db(crawl)})
    one_line_error(nested, 1, "crawl a:b is not in the SQLite store at ")
    assert keys_under(client, "") == others
    forced = cli(
        "forget", "a:b", "--force", settings={"FOCUSED_FRONTIER": redis_server.url, **db(crawl)}
    )
    assert ok(forced) == f"removed {len(own)} keys of crawl a:b from {redis_server.url}\n"
    assert keys_under(client, "focused:a:b:") == {}
    assert len(keys_under(client, "focused:a:polite:")) == len(keys_under(client, "focused:ab:"))
    assert len(keys_under(client, "focused:ab:")) == len(own)


def test_a_shared_crawl_says_the_links_it_left_out_and_forget_removes_their_keys(
    tmp_path, site, redis_server, cli, sample_graph
):
    """Each process of a shared dfs crawl said the links it had left out itself, and asked
    Redis of each one at its close: now the crawl keeps them in Redis, whose keys go with the
    crawl's other keys."""
    settings = {"FOCUSED_FRONTIER": redis_server.url}
    logs = crawl_by_two_processes(tmp_path, site, settings, strategy="dfs", max_depth="1")
    near = {BIRD_SEED, *sample_graph.links[BIRD_SEED]}  # fetched, at levels 0 and 1
    beyond = {page for name in near - {BIRD_SEED} for page in sample_graph.links[name]} - near
    said = left_out_by_max_depth_1(counted(len(beyond), "link was", "links were"))
    for log in logs:
        assert said in log, log[-3000:]
    client = redis.Redis.from_url(redis_server.url)
    assert client.scard("focused:shared:left_out") == len(beyond)
    forgotten = cli(
        "forget", "shared", settings=settings | {"FOCUSED_DB": tmp_path / "focused.sqlite3"}
    )
    assert ok(forgotten).startswith("removed ")
    assert keys_under(client, "focused:shared:") == {}


def test_the_mark_of_a_process_that_never_began_is_a_key_of_the_crawl(redis_server):
    """A process records its budget and a mark (budget_at) it clears once it beats; one refused
    after that (a store check) or killed while starting leaves the mark, which forget left
    behind: not one of the crawl's key names."""
    first = _check_budget(redis_server.url, "starting", "", 10, 10.0)
    client = redis.Redis.from_url(redis_server.url)
    assert client.exists("focused:starting:budget_at")
    assert sorted(forget.crawl_keys(client, "starting")) == [
        b"focused:starting:budget",
        b"focused:starting:budget_at",
    ]
    # A second process's marks, both refused in the order they started: the first's take-back
    # leaves what was before its mark, a key of the crawl too.
    later = _check_budget(redis_server.url, "starting", "", 10, 10.0)
    take_back_budget(first)
    assert sorted(forget.crawl_keys(client, "starting")) == [
        b"focused:starting:budget",
        b"focused:starting:budget_at",
        b"focused:starting:budget_at_taken_back",
    ]
    take_back_budget(later)  # both gone: only what forget removes, or time expires, is left
    assert forget.crawl_keys(client, "starting") == [b"focused:starting:budget_at_taken_back"]


def db(crawl) -> dict:
    return {"FOCUSED_DB": crawl.db}


def store_with(tmp_path, crawl_id: str, status: str | None) -> dict:
    """The settings of an SQLite store holding crawl ``crawl_id`` (unless ``status`` is None)
    ended with ``status`` (``running``: not ended)."""
    path = tmp_path / "store.sqlite3"
    store = SqliteStore(path)
    if status is not None:
        store.start_crawl({"crawl_id": crawl_id, "query": "birds"})
        if status != "running":
            store.finish_crawl(crawl_id, status=status, finish_reason="shutdown")
    store.close()
    return {"FOCUSED_DB": path}


def shared_keys(client: redis.Redis, crawl_id: str, queued: int = 3) -> None:
    """Keys as a shared crawl leaves them: its order, seen set, and ``queued`` requests."""
    prefix = f"focused:{crawl_id}:"
    client.set(prefix + "order", ORDER)
    client.sadd(prefix + "seen", "fp")
    if queued:
        client.zadd(prefix + "frontier", {f"r{i}": i for i in range(queued)})


def test_a_crawl_with_a_live_process_keeps_its_keys_unless_forced(tmp_path, redis_server, cli):
    client = redis.Redis.from_url(redis_server.url)
    shared_keys(client, "live")
    now = client.time()[0]
    client.hset("focused:live:workers", mapping={"h:1:aa": now - 600, "h:2:bb": now - 2})
    # A timeout no slow start-up of the command outlasts.
    settings = {
        "FOCUSED_FRONTIER": redis_server.url,
        "FOCUSED_WORKER_TIMEOUT": 120,
        **store_with(tmp_path, "live", "finished"),
    }
    one_line_error(
        cli("forget", "live", settings=settings),
        1,
        f"crawl live has 1 process alive on {redis_server.url} (a heartbeat within"
        " FOCUSED_WORKER_TIMEOUT=120 s): stop them first (Ctrl-C), or give --force",
    )
    assert client.exists("focused:live:order", "focused:live:frontier", "focused:live:seen") == 3
    forced = cli("forget", "live", "--force", settings=settings)
    assert ok(forced) == f"removed 4 keys of crawl live from {redis_server.url}\n"
    assert forced.stderr == (
        "warning: crawl live had 1 process alive, which stops at its next heartbeat: the keys of"
        " the crawl are gone, but for those it writes as it stops (its pages under way), which"
        " `scrapy forget live` removes once it has stopped\n"
    )
    assert not client.keys("focused:live:*")
    # Once its heartbeat is older than FOCUSED_WORKER_TIMEOUT, a process counts as gone.
    shared_keys(client, "live")
    client.hset("focused:live:workers", mapping={"h:2:bb": now - 200})
    assert ok(cli("forget", "live", settings=settings)).startswith("removed 4 keys")


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ("interrupted", "crawl p is interrupted (shutdown) in the SQLite store at "),
        ("running", "crawl p is running in the SQLite store at "),
        (None, "crawl p is not in the SQLite store at "),
    ],
)
def test_a_crawl_not_recorded_finished_keeps_its_queue_unless_forced(
    tmp_path,
    redis_server,
    cli,
    status,
    said,
):
    # An interrupted shared crawl goes on from its frontier in Redis: removing it loses the queue.
    client = redis.Redis.from_url(redis_server.url)
    shared_keys(client, "p", queued=3)
    settings = {"FOCUSED_FRONTIER": redis_server.url, **store_with(tmp_path, "p", status)}
    result = cli("forget", "p", settings=settings)
    one_line_error(result, 1, said)
    if status is not None:
        assert "not finished: running it again goes on from its 3 requests queued" in result.stderr
    assert len(keys_under(client, "focused:p:")) == 3
    assert ok(cli("forget", "p", "--force", settings=settings)).startswith("removed 3 keys")
    assert not keys_under(client, "focused:p:")


def test_keys_written_by_a_process_stopping_after_a_forced_forget_go_without_force(
    tmp_path, redis_server, cli
):
    """A process of the crawl alive at ``forget --force`` stores its pages under way as it stops,
    and their keys (counters, fetched pages, SimHash bands) were left. The crawl is recorded
    interrupted, so ``forget`` refused them without --force, saying that running the crawl
    again went on from "its 0 requests queued", where the crawl, its order gone, is refused.
    Without its order the keys are no crawl's: they go."""
    client = redis.Redis.from_url(redis_server.url)
    client.hset("focused:gone:counters", mapping={"pages": 23})
    client.hset("focused:gone:fetched", mapping={"http://a.test/": 1})
    client.sadd("focused:gone:near:0:d253", "http://a.test/")
    settings = {"FOCUSED_FRONTIER": redis_server.url, **store_with(tmp_path, "gone", "interrupted")}
    assert ok(cli("forget", "gone", settings=settings)) == (
        f"removed 3 keys of crawl gone from {redis_server.url}\n"
    )
    assert not keys_under(client, "focused:gone:")


def test_keys_are_found_with_scan_and_removed_in_batches(tmp_path, redis_server, cli, monkeypatch):
    client = redis.Redis.from_url(redis_server.url)
    shared_keys(client, "big", queued=0)
    client.mset({f"focused:big:robots:host{i}": "x" for i in range(25)})
    client.zadd("focused:big:conc:order", {"place": 1})  # the places at a host named "order"
    client.mset({f"focused:other:robots:host{i}": "x" for i in range(25)})
    monkeypatch.setattr(forget, "BATCH", 4)
    monkeypatch.setattr(forget, "SCAN_COUNT", 5)
    settings = {"FOCUSED_FRONTIER": redis_server.url, **store_with(tmp_path, "big", "finished")}
    assert ok(cli("forget", "big", settings=settings)).startswith("removed 28 keys")
    assert command_calls(client, "unlink") == math.ceil(28 / 4)
    assert command_calls(client, "scan") > 1
    assert command_calls(client, "keys") == 0
    assert not keys_under(client, "focused:big:")
    assert len(keys_under(client, "focused:other:")) == 25


@pytest.mark.parametrize("output", ["gone", "full", "closed"])
def test_an_output_forget_cannot_print_to_is_one_line(
    tmp_path, redis_server, cli, monkeypatch, output
):
    """`scrapy forget ID | head -1`, `> /dev/full`, `>&-`: the line saying the keys were
    removed was a traceback (BrokenPipeError, OSError, AttributeError), status 1 even for a
    reader that had read enough. As for the reading commands: a reader gone is no failure, an
    output full one line; none (`>&-`) one line before any key is removed."""
    client = redis.Redis.from_url(redis_server.url)
    shared_keys(client, "c")
    settings = {"FOCUSED_FRONTIER": redis_server.url, **store_with(tmp_path, "c", "finished")}
    with unwritable_output(monkeypatch, output):
        result = cli("forget", "c", settings=settings)
    if output == "closed":
        one_line_error(result, 1, "cannot write the output: standard output is closed")
        assert len(keys_under(client, "focused:c:")) == 3
        return
    if output == "full":
        one_line_error(result, 1, "cannot write the output: No space left on device")
    else:
        assert (result.returncode, result.stderr) == (0, "")
    assert not keys_under(client, "focused:c:")


def test_ctrl_c_as_keys_are_removed_says_to_run_it_again(tmp_path, redis_server, cli, monkeypatch):
    """Ctrl-C between two batches of keys was a KeyboardInterrupt traceback: it ends with
    status 130 and one line saying that the same command removes what is left."""
    client = redis.Redis.from_url(redis_server.url)
    shared_keys(client, "c")
    client.mset({f"focused:c:robots:host{i}": "x" for i in range(6)})
    settings = {"FOCUSED_FRONTIER": redis_server.url, **store_with(tmp_path, "c", "finished")}
    monkeypatch.setattr(forget, "BATCH", 4)
    unlink = redis.Redis.unlink

    def interrupted(self: redis.Redis, *keys: bytes) -> int:
        if len(keys_under(client, "focused:c:")) < 8:  # one batch removed
            raise KeyboardInterrupt
        return unlink(self, *keys)

    with monkeypatch.context() as patch:
        patch.setattr(redis.Redis, "unlink", interrupted)
        result = cli("forget", "c", settings=settings)
    assert result == Result(
        130,
        "",
        f"interrupted: some keys of crawl c may be left on {redis_server.url}: run the command"
        " again to remove them\n",
    )
    assert keys_under(client, "focused:c:")
    assert ok(cli("forget", "c", settings=settings)).startswith("removed ")
    assert not keys_under(client, "focused:c:")


@pytest.fixture
def password_server(tmp_path):
    server = RedisServer(tmp_path, password="hush-hush").start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("args", "settings", "status", "message"),
    [
        ((), {}, 2, "give the id of the shared crawl whose keys to remove"),
        (("a", "b"), {}, 2, "give one crawl id, not 2: a b"),
        (("a*",), {}, 2, "crawl_id='a*' may use only letters, digits and . _ : -"),
        (("a",), {"FOCUSED_FRONTIER": ""}, 2, "give the crawl's Redis frontier"),
        (("a",), {"FOCUSED_FRONTIER": "http://h/0"}, 2, "FOCUSED_FRONTIER='http://h/0' is not a"),
        (("a",), {"FOCUSED_FRONTIER": "redis://h/x"}, 2, "its database 'x' is no number"),
        (("a",), {"FOCUSED_FRONTIER": "redis://h:port/0"}, 2, "FOCUSED_FRONTIER='redis://h:port"),
        # rediss:// only: a traceback as redis-py made its connection.
        (
            ("a",),
            {"FOCUSED_FRONTIER": "redis://h/0?ssl_cert_reqs=none"},
            2,
            "FOCUSED_FRONTIER='redis://h/0?ssl_cert_reqs=none' has an option redis-py does not",
        ),
        (("a", "--froce"), {}, 2, "unknown option --froce"),
        (("a",), {"FOCUSED_WORKER_TIMEOUT": "soon"}, 2, "FOCUSED_WORKER_TIMEOUT='soon'"),
    ],
)
def test_bad_input_is_one_line(cli, redis_server, args, settings, status, message):
    settings = {"FOCUSED_FRONTIER": redis_server.url, **settings}
    one_line_error(cli("forget", *args, settings=settings), status, message)


@pytest.mark.parametrize("option", ["ssl_ca_certs", "ssl_certfile", "ssl_keyfile"])
def test_a_tls_file_that_is_missing_is_a_bad_setting(cli, redis_server, option):
    """redis-py reads it only as it connects: it said "Error 2 connecting to 127.0.0.1:PORT. No
    such file or directory.", exit status 1, as of a server that does not answer."""
    url = f"rediss://127.0.0.1:{redis_server.port}/0?{option}=/nonexistent/tls.pem"
    one_line_error(
        cli("forget", "a", settings={"FOCUSED_FRONTIER": url}),
        2,
        f"setting FOCUSED_FRONTIER='{url}': its {option} '/nonexistent/tls.pem' cannot be read:"
        " No such file or directory",
    )


@pytest.mark.parametrize("option", ["ssl_ca_certs", "ssl_certfile"])
def test_a_tls_file_that_is_no_certificate_is_a_bad_setting(cli, redis_server, option):
    """redis-py loads it only as it connects: it said "Error 136 connecting to 127.0.0.1:PORT.
    [X509: NO_CERTIFICATE_OR_CRL_FOUND]...", exit status 1, as of a server that does not
    answer."""
    not_tls = REPO / "scrapy.cfg"
    url = f"rediss://127.0.0.1:{redis_server.port}/0?{option}={not_tls}"
    result = cli("forget", "a", settings={"FOCUSED_FRONTIER": url})
    one_line_error(result, 2, f"setting FOCUSED_FRONTIER='{url}': its TLS files cannot be used: ")


def test_a_certificate_and_its_key_pass_the_check_of_tls_files(tmp_path):
    cert_file, key_file = self_signed_certificate(tmp_path)
    url = (
        f"rediss://127.0.0.1:6379/0?ssl_certfile={cert_file}&ssl_keyfile={key_file}"
        f"&ssl_ca_certs={cert_file}"
    )
    assert check_url(url) == url


def test_a_redis_that_cannot_be_asked_is_one_line(tmp_path, cli, password_server, redis_server):
    down = f"redis://:secret@127.0.0.1:{free_port()}/0"
    result = cli("forget", "a", settings={"FOCUSED_FRONTIER": down})
    one_line_error(result, 1, "cannot reach the Redis frontier at redis://***@127.0.0.1:")
    assert "secret" not in result.stderr
    url = f"redis://127.0.0.1:{password_server.port}/0"
    one_line_error(
        cli("forget", "a", settings={"FOCUSED_FRONTIER": url}),
        1,
        f"cannot reach the Redis frontier at {url}: it asks for a password: give it in the URL",
    )
    wrong = cli("forget", "a", settings={"FOCUSED_FRONTIER": f"redis://:no@{url[8:]}"})
    one_line_error(wrong, 1, "invalid username-password pair")
    one_line_error(
        cli("forget", "nosuch", settings={"FOCUSED_FRONTIER": password_server.url}),
        1,
        f"no keys of crawl nosuch on redis://***@127.0.0.1:{password_server.port}/0",
    )


def test_a_redis_cluster_node_is_one_line(tmp_path, cli):
    cluster = ["--cluster-enabled", "yes", "--cluster-port", str(free_port())]
    server = RedisServer(tmp_path, options=cluster).start()
    try:
        result = cli("forget", "a", settings={"FOCUSED_FRONTIER": server.url})
    finally:
        server.stop()
    one_line_error(
        result,
        2,
        f"the Redis frontier at {server.url} is a Redis Cluster node: a shared crawl needs one"
        " Redis server, not a cluster",
    )
