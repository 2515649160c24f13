"""Tenants and their bearer tokens (docs/security.md): one YAML file the operator manages with
`jumpgate tokens add/list/revoke`, read by the server at every change (a revoked token stops
working at once, no restart).

```yaml
tenants:                       # optional: each tenant's policy (tenancy/policy.py); unlisted ones get the default
  acme:
    send: {networks: [10.1.0.0/16], ports: ["1024-65535"]}
    read_prefix: acme/
tokens:                        # written by `jumpgate tokens add`
  - {id: 9f2c41d07a3b, tenant: acme, role: user, sha256: "...", created: "2026-11-25T22:40:00Z"}
```

A token is `jg_<id>_<secret>`: the id finds its entry, the secret (32 random bytes) is checked
against the stored SHA-256 in constant time. Only hashes are stored: a leaked file gives no token.
SHA-256 without a slow key derivation is enough because the secrets are random and long, not
passwords a dictionary could guess.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .policy import TenantPolicy

Role = Literal["user", "admin"]
TOKEN = re.compile(r"^jg_([0-9a-f]{12})_([0-9a-f]{64})$")
TENANT_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who makes a request: a tenant, and whether it may see and act on every tenant's jobs."""

    tenant: str
    role: Role
    token_id: str = ""

    @property
    def admin(self) -> bool:
        return self.role == "admin"

    def may_see(self, tenant: str) -> bool:
        return self.admin or tenant == self.tenant


# Without a token file (a server on loopback only): everyone is this, as before tenants existed.
LOCAL = Principal("default", "admin")


class TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[0-9a-f]{12}$")
    tenant: str = Field(pattern=TENANT_NAME)
    role: Role = "user"
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    created: str = ""


class TokenFileModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenants: dict[str, TenantPolicy] = Field(default_factory=dict)
    tokens: list[TokenEntry] = Field(default_factory=list)


class TokenFileError(ValueError):
    """The token file cannot be used; the message names the file and the problem."""


class TokenFile:
    """The tenants and tokens of one file; thread-safe; re-read when the file changes."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._model = TokenFileModel()
        self.reload()

    # ---------------------------------------------------------------- reading

    def reload(self) -> None:
        """Read the file if it changed since the last read. A file that became invalid keeps the
        last good contents in force (and raises, for the operator's command to report)."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            with self._lock:
                self._model, self._stamp = TokenFileModel(), None
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        model = _parse(self.path)
        with self._lock:
            self._model, self._stamp = model, stamp

    def _current(self) -> TokenFileModel:
        try:
            self.reload()
        except TokenFileError:
            pass  # the last good contents stay in force; `jumpgate tokens list` says what is wrong
        with self._lock:
            return self._model

    def authenticate(self, token: str) -> Principal | None:
        match = TOKEN.match(token.strip())
        if match is None:
            return None
        token_id, secret = match.groups()
        digest = hashlib.sha256(secret.encode()).hexdigest()
        for entry in self._current().tokens:
            if entry.id == token_id and hmac.compare_digest(entry.sha256, digest):
                return Principal(entry.tenant, entry.role, entry.id)
        return None

    def policy(self, tenant: str) -> TenantPolicy:
        return self._current().tenants.get(tenant) or TenantPolicy()

    def entries(self) -> list[TokenEntry]:
        return list(self._current().tokens)

    # ---------------------------------------------------------------- writing (the operator's commands)

    def add(self, tenant: str, role: Role = "user") -> str:
        """A new token for `tenant`; returns it (the only time it is ever shown)."""
        if not re.match(TENANT_NAME, tenant):
            raise TokenFileError(f"tenant {tenant!r}: letters, digits, '.', '_' and '-' only, 1-63 characters")
        token_id, secret = secrets.token_hex(6), secrets.token_hex(32)
        entry = TokenEntry(id=token_id, tenant=tenant, role=role, sha256=hashlib.sha256(secret.encode()).hexdigest(),
                           created=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        model = _parse(self.path) if self.path.exists() else TokenFileModel()
        model.tokens.append(entry)
        self._write(model)
        return f"jg_{token_id}_{secret}"

    def revoke(self, token_id: str) -> bool:
        model = _parse(self.path) if self.path.exists() else TokenFileModel()
        kept = [e for e in model.tokens if e.id != token_id]
        if len(kept) == len(model.tokens):
            return False
        model.tokens = kept
        self._write(model)
        return True

    def _write(self, model: TokenFileModel) -> None:
        """Atomically, readable by the operator only (the hashes are not secrets, the policies
        may be)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(model.model_dump(mode="json", exclude_defaults=False), f, sort_keys=False)
        os.replace(tmp, self.path)
        self.reload()


def _parse(path: Path) -> TokenFileModel:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise TokenFileError(f"cannot read the token file {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise TokenFileError(f"{path}: not valid YAML: {e}") from None
    try:
        return TokenFileModel.model_validate(data)
    except ValidationError as e:
        where = lambda loc: ".".join(str(p) for p in loc)  # noqa: E731
        problems = "; ".join(f"{where(err['loc'])}: {err['msg']}" for err in e.errors())
        raise TokenFileError(f"{path}: {problems}") from None


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None
