"""``kreassign acls``: print the kafka-acls.sh commands that grant each principal what kreassign needs.

The grants and their reasons are ``engine.kafka.acls`` (the table of docs/engine.md,
Security): the engine's, operators', analysts', and an admin's for ``kreassign
topics create``. The topics the engine may reassign (and operators verify) are
named explicitly: ``--topics``, a ``--topic-prefix``, the topics of a
``--reassignment-json-file``, or ``--all-topics`` (``--topic '*'``, the broad
grant the others narrow). Nothing is sent to any cluster: an administrator runs
the commands, with their own ``--command-config``.
"""

from __future__ import annotations

import json

from engine.kafka import acls as A
from engine.cli import CliError, read_text
from engine.kafka.topics import DEFAULT_PREFIX


def add_parser(sub) -> None:
    p = sub.add_parser("acls", help="print the kafka-acls.sh commands granting each principal what kreassign needs")
    g = p.add_argument_group("principals (Kafka principals, e.g. User:alice; repeatable)")
    g.add_argument("--principal-engine", action="append", default=[], metavar="P", help="the engine workers")
    g.add_argument("--principal-operator", action="append", default=[], metavar="P",
                   help="operators and services: publish commands, status, verify, list, dead-letters")
    g.add_argument("--principal-analyst", action="append", default=[], metavar="P",
                   help="analysts: analytics run, replay, status")
    g.add_argument("--principal-admin", action="append", default=[], metavar="P",
                   help="who runs kreassign topics create (often a super user, who needs nothing)")
    t = p.add_mutually_exclusive_group()
    t.add_argument("--topics", metavar="T1,T2", help="the topics the engine may reassign (least privilege)")
    t.add_argument("--topic-prefix", metavar="PREFIX", help="every topic whose name starts with PREFIX")
    t.add_argument("--reassignment-json-file", metavar="FILE", help="the topics of a reassignment JSON file")
    t.add_argument("--all-topics", action="store_true", help="every topic (--topic '*')")
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help=f"prefix of kreassign's topic names (default {DEFAULT_PREFIX})")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="put into the printed commands (default BROKER:PORT)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): commands, each under a comment saying why; json: one object per grant")
    p.set_defaults(func=run)


def scope_of(args) -> A.TopicScope | None:
    if args.all_topics:
        return A.TopicScope(everything=True)
    if args.topic_prefix is not None:
        if not args.topic_prefix:
            raise CliError("--topic-prefix: empty (use --all-topics for every topic)")
        return A.TopicScope(prefix=args.topic_prefix)
    if args.topics is not None:
        names = tuple(t.strip() for t in args.topics.split(",") if t.strip())
        if not names:
            raise CliError("--topics: no topic named")
        return A.TopicScope(names=names)
    if args.reassignment_json_file is not None:
        from engine.core import reassignment_json

        try:
            targets = reassignment_json.parse(read_text(args.reassignment_json_file))
        except reassignment_json.ReassignmentJsonError as e:
            raise CliError(f"{args.reassignment_json_file}: {e}") from None
        return A.TopicScope(names=tuple(sorted({t.topic for t in targets})))
    return None


def run(args) -> int:
    principals = {A.ENGINE: args.principal_engine, A.OPERATOR: args.principal_operator,
                  A.ANALYST: args.principal_analyst, A.ADMIN: args.principal_admin}
    if not any(principals.values()):
        raise CliError("name at least one principal: --principal-engine, --principal-operator, "
                       "--principal-analyst or --principal-admin (e.g. User:alice)")
    for role, ps in principals.items():
        for pr in ps:
            kind, sep, name = pr.partition(":")
            if not sep or not kind or not name:
                raise CliError(f"--principal-{role} {pr!r}: a Kafka principal is TYPE:NAME, e.g. User:alice")
    scope = scope_of(args)
    if scope is None and (args.principal_engine or args.principal_operator):
        raise CliError("say which topics the engine may reassign (and operators verify): --topics T1,T2, "
                       "--topic-prefix PREFIX, --reassignment-json-file FILE, or --all-topics")
    items = A.bindings(principals, args.prefix, scope or A.TopicScope())
    if args.format == "json":
        for b in items:
            r = b.need.resource
            print(json.dumps({"role": b.role, "principal": b.principal, "operations": list(b.need.operations),
                              "resource_type": r.kind, "name": r.name or None,
                              "pattern": "prefixed" if r.prefixed else "literal", "why": b.need.why,
                              "command": b.command(args.bootstrap_server)}))
        return 0
    print(f"# kreassign's Kafka ACLs for --prefix {args.prefix}"
          + (f", the engine reassigning {scope}" if scope is not None and args.principal_engine else "")
          + " (docs/engine.md, Security)")
    print("# Run them with an administrator's settings (--command-config); Read, Write and Alter imply Describe, "
          "AlterConfigs implies DescribeConfigs.")
    print(A.render(items, args.bootstrap_server))
    return 0
