"""The commands that grow a session's DAG: a node, and a sibling version of one.

Mixed into ``domain.session.Session``: each validates the node's role, id,
edge and content before it triggers ``NodeAppended``, so replaying the log
can never fail.  Pins, runs, checkout and the model are the aggregate's own;
attach and merge are ``domain.session_context``'s.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from typing import Any

from domain import errors
from domain.block_checks import check_blocks
from domain.events import NodeAppended
from domain.limits import MAX_LABEL, check_id, check_json, check_label, check_node_id
from domain.node_text import node_blocks, node_texts, remember_json, remembered_json
from domain.nodes import ROLES, NodeRef
from domain.session_part import SessionPart
from domain.tokens import node_token_counts

JSON = dict[str, Any]
# How a sibling version relates to the node it is a version of: a retry asks the
# same prompt again for a new sample (its content may well differ), an edit
# changes the node itself.
VERSION_KINDS = ("retry", "edit")


def content_digest(role: str, name: str | None, input: Any, output: Any) -> str:
    """A short digest of a node's content, recorded with it (for audit and dedup).

    It no longer decides retry versus edit: a regenerated answer is a retry
    even though its text differs, so the caller says which it is.
    """
    # ``json.dumps([role, name, input, output], sort_keys=True, default=str)``, hashed
    # part by part so a large text's JSON its command remembered is not made again
    digest = hashlib.sha256(b"[")
    for index, part in enumerate((role, name, input, output)):
        encoded = remembered_json(part) or json.dumps(part, sort_keys=True, default=str)
        digest.update(((", " if index else "") + encoded).encode())
    digest.update(b"]")
    return digest.hexdigest()[:16]


def check_content(input: Any, output: Any, metadata: JSON | None) -> None:
    check_json("input", input)
    check_json("output", output)
    check_json("metadata", metadata)
    check_blocks("input", input)
    check_blocks("output", output)


class NodeCommands(SessionPart):
    """Mixed into ``Session`` (``SessionPart`` says what of it they use)."""

    def append_node(
        self,
        role: str,
        *,
        node_id: str | None = None,
        name: str | None = None,
        input: Any = None,
        output: Any = None,
        predecessor: str | None = None,
        caller: str | None = None,
        call_id: str | None = None,
        reads: list[str] | None = None,
        metadata: JSON | None = None,
        at: datetime | None = None,
        sibling_of: str | None = None,
        version_kind: str | None = None,
    ) -> str:
        if role not in ROLES:
            raise errors.InvalidCommand(f"role must be one of {sorted(ROLES)}", role=role)
        check_node_id(node_id)
        check_id("call_id", call_id)
        check_label("name", name, MAX_LABEL)
        check_content(input, output, metadata)
        node_id = node_id or str(uuid.uuid4())
        if self.knows(node_id):
            raise errors.DuplicateNode(f"node {node_id!r} already exists", node_id=node_id)
        # Before resolving the edge: a parent that is the new node itself is not
        # yet known, so resolving first would report it as an unknown node.
        if node_id in (predecessor, caller):
            raise errors.CycleRefused("a node cannot be its own parent", node_id=node_id)
        predecessor, caller = self._resolve_edge(role, predecessor, caller)
        for read in reads or []:
            if not self.knows(read):
                raise errors.NodeNotFound(f"read of unknown node {read!r}", node_id=read)
        remember_json(input, output)  # for the event, its digest and the projection
        self.trigger_event(
            NodeAppended,
            node_id=node_id,
            seq=self.next_seq,
            role=role,
            name=name,
            input=input,
            output=output,
            predecessor=predecessor,
            caller=caller,
            call_id=(call_id or node_id) if role == "tool" else None,
            reads=list(reads or []),
            metadata=dict(metadata or {}),
            sibling_of=sibling_of,
            version_kind=version_kind,
            digest=content_digest(role, name, input, output),
            token_counts=node_token_counts(
                *node_texts(role, input, output), node_blocks(role, input, output)
            ),
            timestamp=at,
        )
        return node_id

    def _resolve_edge(
        self, role: str, predecessor: str | None, caller: str | None
    ) -> tuple[str | None, str | None]:
        if predecessor is not None and caller is not None:
            raise errors.InvalidEdge("give predecessor or caller, not both")
        if role == "tool":
            if predecessor is not None:
                raise errors.InvalidEdge("a tool node hangs off its caller, not a predecessor")
            caller = caller or self._default_caller()
            if self.node(caller).role != "assistant":
                raise errors.InvalidEdge("a tool node's caller must be an assistant node")
            return None, caller
        if caller is not None:
            raise errors.InvalidEdge("only tool nodes have a caller")
        if predecessor is None:
            if self.head is None:
                return None, None
            return self.head, None
        self.node(predecessor)
        return predecessor, None

    def _default_caller(self) -> str:
        if self.head is None:
            raise errors.InvalidEdge("a tool node needs an assistant caller")
        ref = self.node(self.head)
        if ref.role == "assistant":
            return ref.node_id
        if ref.role == "tool" and ref.parent:
            return ref.parent
        raise errors.InvalidEdge("a tool node needs an assistant caller")

    def add_sibling(
        self,
        of: str,
        *,
        kind: str,
        input: Any = None,
        output: Any = None,
        name: str | None = None,
        node_id: str | None = None,
        metadata: JSON | None = None,
        at: datetime | None = None,
    ) -> str:
        """A sibling version of ``of``: ``kind`` says whether it is a retry or an edit.

        The caller knows which it is; the content cannot tell: a retry is a
        new sample of the same prompt, so its text is usually new.
        """
        if kind not in VERSION_KINDS:
            raise errors.InvalidCommand("kind must be 'retry' or 'edit'", kind=kind)
        self._refuse_while_running(kind)
        ref = self.node(of)
        if ref.role not in ROLES:  # an attach or a merge: nothing to say again
            raise errors.InvalidCommand(f"a {ref.role} node has no versions", node_id=of)
        if ref.external:
            raise errors.InvalidCommand("retry the branch point in its own session", node_id=of)
        name = name if name is not None else ref.name
        if ref.parent is None:
            return self._append_root_sibling(ref, kind, input, output, name, node_id, metadata, at)
        return self.append_node(
            ref.role,
            node_id=node_id,
            name=name,
            input=input,
            output=output,
            call_id=ref.slot if ref.edge == "caller" else None,
            metadata=metadata,
            at=at,
            sibling_of=of,
            version_kind=kind,
            predecessor=None if ref.edge == "caller" else ref.parent,
            caller=ref.parent if ref.edge == "caller" else None,
        )

    def _append_root_sibling(
        self,
        ref: NodeRef,
        kind: str,
        input: Any,
        output: Any,
        name: str | None,
        node_id: str | None,
        metadata: JSON | None,
        at: datetime | None,
    ) -> str:
        """A second root: append_node would default the predecessor to HEAD."""
        check_node_id(node_id)
        check_label("name", name, MAX_LABEL)
        check_content(input, output, metadata)
        node_id = node_id or str(uuid.uuid4())
        if self.knows(node_id):
            raise errors.DuplicateNode(f"node {node_id!r} already exists", node_id=node_id)
        remember_json(input, output)  # for the event, its digest and the projection
        self.trigger_event(
            NodeAppended,
            node_id=node_id, seq=self.next_seq, role=ref.role, name=name,
            input=input, output=output, predecessor=None, caller=None, call_id=None,
            reads=[], metadata=dict(metadata or {}), sibling_of=ref.node_id,
            version_kind=kind, digest=content_digest(ref.role, name, input, output),
            token_counts=node_token_counts(*node_texts(ref.role, input, output),
                                           node_blocks(ref.role, input, output)),
            timestamp=at,
        )  # fmt: skip
        return node_id
