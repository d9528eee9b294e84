"""``flare share``: a link to one run, listed by its public name only, and revoked by it."""

from __future__ import annotations

import json
from types import SimpleNamespace

from flare_core.cli.parser import main
from flare_core.store import shares
from flare_core.store.runs import RunStore
from tests.store.test_bundle import make_run


def _capture(capsys):
    def flare(*args: str, runs_dir, check: bool = True) -> SimpleNamespace:
        """``flare ARGS`` run in this process (the command itself, without a new interpreter)."""
        code = main([*args, "--runs-dir", str(runs_dir)])
        out = capsys.readouterr()
        if check:
            assert code == 0, out.err
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return flare


def test_share_creates_lists_and_revokes_a_link(tmp_path, capsys):
    flare = _capture(capsys)
    runs = tmp_path / "runs"
    make_run(runs, "run-a")
    store = RunStore(runs)
    made = flare(
        "share", "run-a", "--no-texts", "--expires", "7d", "--url", "https://flare.example/", runs_dir=runs
    )
    url = made.stdout.strip()
    assert url.startswith("https://flare.example/?share=") and "figures only" in made.stderr
    token = url.split("share=", 1)[1]
    run_id, link = shares.find_link(store, token)
    assert run_id == "run-a" and link.texts is False and link.expires is not None
    assert f"--revoke {token[:6]}" in made.stderr

    listed = flare("share", "run-a", "--list", runs_dir=runs).stdout
    assert token[:6] in listed and "figures only" in listed and "active" in listed and token not in listed
    rows = json.loads(flare("share", "run-a", "--list", "--json", runs_dir=runs).stdout)
    assert [(r["prefix"], r["texts"], r["state"]) for r in rows] == [(token[:6], False, "active")]
    assert "digest" not in rows[0]

    flare("share", "run-a", "--revoke", token[:6], runs_dir=runs)
    assert shares.find_link(store, token) is None
    assert "revoked" in flare("share", "run-a", "--list", runs_dir=runs).stdout


def test_share_refuses_bad_requests_and_changes_nothing(tmp_path, capsys):
    flare = _capture(capsys)
    runs = tmp_path / "runs"
    make_run(runs, "run-a")
    for args, message in (
        (("run-a", "--expires", "yesterday"), "neither a duration"),
        (("run-a", "--expires", "2001-01-01"), "in the past"),
        (("run-a", "--revoke", "zzzz"), "no share link starting with 'zzzz'"),
        (("no-such-run",), "no run 'no-such-run'"),
        (("../etc",), "invalid run id"),
    ):
        proc = flare("share", *args, runs_dir=runs, check=False)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert not (runs / "run-a" / shares.SHARES).exists()


def test_revoke_takes_the_name_a_longer_beginning_the_token_or_the_link(tmp_path, capsys):
    flare = _capture(capsys)
    runs = tmp_path / "runs"
    make_run(runs, "run-a")
    store = RunStore(runs)
    url = "https://flare.example:8501"
    made = [flare("share", "run-a", "--url", url, runs_dir=runs).stdout.strip() for _ in range(4)]
    tokens = [link.split("share=", 1)[1] for link in made]
    wrong_link = f"{url}/?share={tokens[3][:-1]}{'A' if tokens[3][-1] != 'A' else 'B'}"
    for args, message in (
        (("--revoke", wrong_link), "has no share link with this whole token"),
        (("--revoke", f"{url}/?share=short&run=run-a"), "carries no valid share token"),
        (("--revoke", f"{url}/?run=run-a"), "nor a share link"),
        (("--revoke", "not a token"), "neither a link's name"),
    ):
        proc = flare("share", "run-a", *args, runs_dir=runs, check=False)
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
    assert [link.state() for link in shares.list_links(store, "run-a")] == ["active"] * 4
    for given in (tokens[0][:6], tokens[1][:8], tokens[2], made[3] + "&run=run-a"):
        out = flare("share", "run-a", "--revoke", given, runs_dir=runs).stdout
        assert f"revoked link {given[:6] if 'share=' not in given else tokens[3][:6]}" in out
    assert [link.state() for link in shares.list_links(store, "run-a")] == ["revoked"] * 4
    assert all(shares.find_link(store, token) is None for token in tokens)
