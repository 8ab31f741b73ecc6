"""This member's stable identity and last claims, kept in its data directory.

A restarted worker reads them back, so the group leader recognises it and
gives it back the tasks whose state is on its disk (the file is
``streamjoin-member.json``; writes are atomic: temporary file, then rename).
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

from streamjoin.membership.userdata import AssignmentInfo

__all__ = ["MemberFile"]

logger = logging.getLogger(__name__)


class MemberFile:
    """The member's identity (``id``) and its last ``generation``, ``actives``,
    ``standbys`` and ``warmups``, loaded once and written on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: the member as kept in its JSON file (values: any JSON type)
        self.member: dict[str, Any] | None = None

    def load(self, static_id: str | None, app_id: str) -> dict[str, Any]:
        """The member (read on first use). A static id wins; a file with another
        identity is not ours and is dropped; a new member gets a random id."""
        if self.member is not None:
            return self.member
        member: dict[str, Any] = {}
        try:
            loaded = json.loads(self.path.read_text())
            if isinstance(loaded, dict) and isinstance(loaded.get("id"), str):
                member = loaded
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            logger.warning(
                "streamjoin: ignoring unreadable %s (%s); starting fresh", self.path, exc
            )
        if static_id:
            if member.get("id") not in (None, static_id):
                member = {}  # a different identity: its claims are not ours
            member["id"] = str(static_id)
        member.setdefault("id", f"{app_id}-{uuid.uuid4().hex[:12]}")
        self.member = member
        self.write()
        return member

    def remember(self, info: AssignmentInfo, member: dict[str, Any]) -> None:
        """Keep the generation and the share the leader gave this member."""
        member.update(
            generation=info.generation,
            actives={t: sorted(p) for t, p in info.actives.items()},
            standbys={t: sorted(p) for t, p in info.standbys.items()},
            warmups={t: sorted(p) for t, p in info.warmups.items()},
        )
        self.write()

    def write(self) -> None:
        """Write the member atomically; a failure is logged, never raised."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.member, sort_keys=True))
            tmp.replace(self.path)
        except OSError as exc:
            logger.warning("streamjoin: cannot persist member state to %s: %s", self.path, exc)
