"""Share links: unguessable tokens stored only as digests, expiry, revocation, and links that never travel
in a bundle."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import secrets
import threading

import pytest

from flare_core.errors import BundleError
from flare_core.store import shares
from flare_core.store.bundle import export_run
from flare_core.store.bundle_import import import_run
from flare_core.store.runs import RunStore
from tests.store.test_bundle import make_run, rezip

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def store(tmp_path):
    make_run(tmp_path / "runs", "run-a")
    make_run(tmp_path / "runs", "run-b")
    return RunStore(tmp_path / "runs")


def test_a_token_carries_at_least_128_random_bits_and_only_its_digest_is_stored(store):
    token, link = shares.create_link(store, "run-a", texts=False)
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert len(raw) * 8 >= 128 and len(raw) == shares.TOKEN_BYTES
    stored = (store.get("run-a").path / shares.SHARES).read_text()
    assert token not in stored and token[shares.PREFIX_CHARS :] not in stored
    (row,) = json.loads(stored)["links"]
    assert row["digest"] == hashlib.sha256(token.encode()).hexdigest() == link.digest
    assert row["prefix"] == token[:6] and row["texts"] is False and row["expires"] is None
    # the characters after the public name carry more than 128 bits on their own
    assert (len(token) - shares.PREFIX_CHARS) * 6 >= 128


def test_a_token_opens_its_own_run_only_and_a_random_or_malformed_one_opens_nothing(store):
    token_a, _ = shares.create_link(store, "run-a")
    token_b, _ = shares.create_link(store, "run-b", texts=False)
    assert shares.find_link(store, token_a)[0] == "run-a"
    found_b = shares.find_link(store, token_b)
    assert found_b[0] == "run-b" and found_b[1].texts is False
    for wrong in (secrets.token_urlsafe(24), token_a[:-1], token_a + "x", "", "../run-a", "a" * 500, None):
        assert shares.find_link(store, wrong) is None


def test_an_expired_link_is_refused_from_its_expiry_on(store):
    token, link = shares.create_link(store, "run-a", expires=NOW + dt.timedelta(hours=1))
    assert link.expires == "2026-11-25T13:00:00+00:00"
    assert shares.find_link(store, token, now=NOW + dt.timedelta(minutes=59)) is not None
    assert shares.find_link(store, token, now=NOW + dt.timedelta(hours=1)) is None
    assert link.state(NOW + dt.timedelta(hours=2)) == "expired"


def test_a_revoked_link_is_refused_and_revoking_names_it_by_prefix_or_whole_token(store):
    first, link1 = shares.create_link(store, "run-a")
    second, link2 = shares.create_link(store, "run-a")
    assert shares.revoke_links(store, "run-a", first[:5]).prefix == link1.prefix
    assert shares.find_link(store, first) is None and shares.find_link(store, second) is not None
    assert shares.revoke_links(store, "run-a", second).revoked is not None  # the whole token works too
    assert shares.find_link(store, second) is None
    assert [link.state() for link in shares.list_links(store, "run-a")] == ["revoked", "revoked"]
    with pytest.raises(ValueError, match="at least 4 characters"):
        shares.revoke_links(store, "run-a", first[:3])
    with pytest.raises(ValueError, match="no share link starting with"):
        shares.revoke_links(store, "run-b", first[:6])  # a link of another run


def test_an_ambiguous_prefix_revokes_nothing(store, monkeypatch):
    tokens = iter(["AbCdEf" + "x" * 26, "AbCdXy" + "y" * 26])
    monkeypatch.setattr(shares.secrets, "token_urlsafe", lambda n: next(tokens))
    shares.create_link(store, "run-a")
    shares.create_link(store, "run-a")
    with pytest.raises(ValueError, match="several links"):
        shares.revoke_links(store, "run-a", "AbCd")
    assert [link.state() for link in shares.list_links(store, "run-a")] == ["active", "active"]


def test_tokens_never_start_with_a_dash_and_names_stay_unique(store, monkeypatch):
    tokens = iter(["-bcdef" + "x" * 26, "Abcdef" + "y" * 26, "Abcdef" + "z" * 26, "Qbcdef" + "w" * 26])
    monkeypatch.setattr(shares.secrets, "token_urlsafe", lambda n: next(tokens))
    first, _ = shares.create_link(store, "run-a")
    second, _ = shares.create_link(store, "run-a")
    assert (first[0], second[:6]) == ("A", "Qbcdef")


def test_links_created_at_once_are_all_kept(store):
    made: list[str] = []
    threads = [
        threading.Thread(target=lambda: made.append(shares.create_link(store, "run-a")[0])) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(link.prefix for link in shares.list_links(store, "run-a")) == sorted(t[:6] for t in made)
    assert all(shares.find_link(store, token)[0] == "run-a" for token in made)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("30m", NOW + dt.timedelta(minutes=30)),
        ("12h", NOW + dt.timedelta(hours=12)),
        (" 7d ", NOW + dt.timedelta(days=7)),
        ("2w", NOW + dt.timedelta(days=14)),
        ("2026-12-31", dt.datetime(2026, 12, 31, tzinfo=dt.timezone.utc)),
        ("2026-12-01T08:30+01:00", dt.datetime(2026, 12, 1, 7, 30, tzinfo=dt.timezone.utc)),
        (None, None),
        ("never", None),
    ],
)
def test_expiry_is_read_from_durations_and_dates(value, expected):
    assert shares.parse_expiry(value, now=NOW) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0d", "at least 1 day"),
        ("2026-01-01", "in the past"),
        ("soon", "neither a duration"),
        ("7y", "neither"),
    ],
)
def test_a_bad_expiry_is_refused_with_its_reason(value, message):
    with pytest.raises(ValueError, match=message):
        shares.parse_expiry(value, now=NOW)


def test_a_damaged_links_file_opens_nothing(store):
    token, _ = shares.create_link(store, "run-a")
    (store.get("run-a").path / shares.SHARES).write_text("{not json")
    assert shares.find_link(store, token) is None and shares.list_links(store, "run-a") == []


def test_links_never_travel_in_a_bundle(store, tmp_path):
    shares.create_link(store, "run-a")
    bundle = export_run(store.get("run-a"), tmp_path / "a.zip").read_bytes()
    import io
    import zipfile

    assert shares.SHARES not in zipfile.ZipFile(io.BytesIO(bundle)).namelist()
    forged = rezip(bundle, add={shares.SHARES: json.dumps({"links": []}).encode()})
    with pytest.raises(BundleError, match="share links"):
        import_run(RunStore(tmp_path / "other"), forged)
