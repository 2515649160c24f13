"""Who may do what (docs/security.md): the service's side of tenancy. A request's principal comes
from its bearer token (or is the local admin when the server has no token file, which it only
allows on loopback); a job belongs to the tenant that submitted it and is visible to that tenant
and to admins only; a request's sends and reads are admitted by its tenant's policy before
anything is compiled, and its send hosts are replaced by the addresses the policy checked."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ..contract.errors import Unauthorized, UnknownJob
from ..dataflow.plan import LogicalPlan, Read, Send
from ..tenancy.policy import Reserved, SendTarget, TenantPolicy, check_reads, check_sends
from ..tenancy.tokens import LOCAL, Principal, TokenFile


class Access:
    def __init__(self, tokens: TokenFile | None, reserved: Callable[[], Reserved],
                 roots: Callable[[], Sequence[str]], send_allow: Sequence[str] = ()) -> None:
        self.tokens = tokens
        self.reserved = reserved  # asked per request: agents' ports appear as nodes come up
        self.roots = roots  # the data roots (real paths) a read's real path may lie under
        self.send_allow = tuple(send_allow)

    @property
    def enabled(self) -> bool:
        return self.tokens is not None

    def principal(self, token: str | None) -> Principal:
        """The caller; Unauthorized without a token the file knows (when there is a file)."""
        if self.tokens is None:
            return LOCAL
        if not token:
            raise Unauthorized("a bearer token is required (Authorization: Bearer <token>; "
                               "`jumpgate tokens add` makes one)")
        who = self.tokens.authenticate(token)
        if who is None:
            raise Unauthorized("the token is not known to this server (mistyped, or revoked)")
        return who

    def policy(self, tenant: str) -> TenantPolicy:
        return self.tokens.policy(tenant) if self.tokens is not None else TenantPolicy()

    def visible(self, tenant: str, who: Principal, job_id: str) -> None:
        """A job of another tenant does not exist for the caller: the answer gives nothing away."""
        if not who.may_see(tenant):
            raise UnknownJob(f"no job {job_id!r}")

    def admit(self, plan: LogicalPlan, who: Principal, source: str | None) -> LogicalPlan:
        """The plan with its sends pointed at the addresses the tenant's policy admitted; raises
        Forbidden (403) naming the first send or read it refuses."""
        policy = self.policy(who.tenant)
        check_reads(((r.name, plan.op_paths.get(r.name, r.name), [self._relative(p) for p in r.paths])
                     for r in plan.ops if isinstance(r, Read)), policy, who.tenant)
        targets = [SendTarget(s.name, plan.op_paths.get(s.name, s.name), s.host, s.port) for s in plan.sends]
        addresses = check_sends(targets, policy, source, self.reserved(), who.tenant, self.send_allow)
        ops = tuple(replace(o, host=addresses[o.name]) if isinstance(o, Send) else o for o in plan.ops)
        return replace(plan, ops=ops)

    def _relative(self, real: str) -> str:
        """A read's real path relative to the data root holding it (symlinks resolved: a link
        inside the tenant's directory to another tenant's file is caught)."""
        for root in self.roots():
            root = str(root).rstrip("/")
            if real == root or real.startswith(root + "/"):
                return os.path.relpath(real, root)
        return str(Path(real))

