"""``caldera redis-acl``: the store's users (``cluster/store/acl.py``) as a Redis ACL file, or as
deploy/'s two Secrets: ``caldera-redis`` (each process's URL, its user and password in it) and
``caldera-redis-acl`` (the ACL file Redis loads).

Passwords never come from the command line: each is read from ``--password-dir/<user>``, or
generated there (mode 0600) when that file is missing, so that running it again gives the
same users; without ``--password-dir`` they are generated for this output only. The ACL file
holds the passwords' SHA-256, never the passwords.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from cluster.model.text import one_line
from cluster.store.acl import Role, acl_file
from cluster.store.keys import Keys

NAMESPACE = "caldera-system"
URL = "redis://caldera-redis.caldera-system.svc:6379/0"
URLS_SECRET = "caldera-redis"
ACL_SECRET = "caldera-redis-acl"
ACL_KEY = "users.acl"


def url_key(role: Role) -> str:
    """The key of ``role``'s URL in the ``caldera-redis`` Secret."""
    return f"{role.value}.url"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "redis-acl",
        help="the store's users, one per process (an ACL file for redis-server, or deploy/'s Secrets)",
    )
    p.add_argument("--cluster", default="default", help="cluster name in the store (default: default)")
    p.add_argument(
        "--password-dir",
        default=None,
        help="each user's password is the file DIR/<user> (caldera-mirror, …), generated there when missing "
        "(mode 0600); needed with -o acl, whose file holds only the passwords' hashes (default: none, "
        "passwords generated for this output only)",
    )
    p.add_argument(
        "-o",
        "--output",
        default="acl",
        choices=["acl", "secrets"],
        help="acl: the file for redis-server --aclfile; secrets: deploy/'s Secrets caldera-redis (one URL per "
        "process) and caldera-redis-acl (the ACL file), as YAML for kubectl apply -f",
    )
    p.add_argument(
        "--redis-url",
        default=URL,
        help=f"with -o secrets: the store's URL without user or password, each process's going in (default: {URL})",
    )
    p.add_argument(
        "--namespace", default=NAMESPACE, help=f"with -o secrets: the Secrets' namespace (default: {NAMESPACE})"
    )
    p.set_defaults(run=run)


def passwords(directory: Path | None) -> dict[Role, str]:
    """Each user's password: read from ``directory/<user>``, or generated (and written there
    when a directory is given). Every file is read and checked before any is written, so a
    bad one changes nothing; ValueError names it."""
    if directory is None:
        return {role: secrets.token_hex(32) for role in Role}
    found: dict[Role, str] = {}
    for role in Role:
        path = directory / role.user
        try:
            found[role] = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"--password-dir: {path}: {getattr(e, 'strerror', None) or e}") from None
        if not found[role]:
            raise ValueError(f"--password-dir: {path} is empty (expected the password of {role.user})")
    out: dict[Role, str] = {}
    for role in Role:
        if role in found:
            out[role] = found[role]
            continue
        out[role] = secrets.token_hex(32)
        path = directory / role.user
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(out[role] + "\n")
        except OSError as e:
            raise ValueError(f"--password-dir: {path}: {e.strerror or e}") from None
    return out


def base_url(url: str) -> urllib.parse.SplitResult:
    """``--redis-url``, checked: redis:// or rediss://, a host, no user or password."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValueError(f"--redis-url: {url!r} (expected redis://HOST:PORT/DB or rediss://…)")
    if "@" in parts.netloc:
        raise ValueError(
            "--redis-url: holds a user or password (expected none: each process's user and its password "
            "from --password-dir go in)"
        )
    return parts


def user_url(base: urllib.parse.SplitResult, role: Role, password: str) -> str:
    """The URL ``role``'s process connects with: ``base`` with the user and password in it."""
    credentials = f"{urllib.parse.quote(role.user, safe='')}:{urllib.parse.quote(password, safe='')}"
    return base._replace(netloc=f"{credentials}@{base.netloc}").geturl()


def manifests(keys: Keys, secret: dict[Role, str], base: urllib.parse.SplitResult, namespace: str) -> list[Any]:
    """deploy/'s two Secrets for these users and passwords."""
    labels = {"app.kubernetes.io/part-of": "caldera"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": URLS_SECRET, "namespace": namespace, "labels": labels},
            "type": "Opaque",
            "stringData": {url_key(role): user_url(base, role, secret[role]) for role in Role},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": ACL_SECRET, "namespace": namespace, "labels": labels},
            "type": "Opaque",
            "stringData": {ACL_KEY: acl_file(keys, secret)},
        },
    ]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the ACL file) as literal blocks."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def render(objects: list[Any]) -> str:
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, width=1_000_000)


def run(args: argparse.Namespace) -> int:
    prog = "caldera redis-acl"
    try:
        try:
            keys = Keys(args.cluster)
        except ValueError as e:
            raise ValueError(f"--cluster: {e}") from None
        if args.output == "acl" and args.password_dir is None:
            raise ValueError(
                "--password-dir: needed with -o acl (the ACL file holds only hashes: the passwords must be kept)"
            )
        base = base_url(args.redis_url)
        secret = passwords(Path(args.password_dir) if args.password_dir is not None else None)
    except ValueError as e:
        print(f"{prog}: error: {one_line(str(e))}", file=sys.stderr)
        return 2
    if args.output == "acl":
        sys.stdout.write(acl_file(keys, secret))
    else:
        sys.stdout.write(render(manifests(keys, secret, base, args.namespace)))
    return 0
