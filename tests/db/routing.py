"""Does a SQL statement pin every tenant table it touches to one namespace?

A tenant-sharding engine (Citus, distributed by ``namespace``) routes a statement to one
shard when the statement fixes the distribution column of each distributed table it reads or
writes to a single value. This module answers that from the statement's parse tree
(``pglast``, PostgreSQL's own parser), not from its text:

- each reference to a tenant table, at any depth (CTEs, subqueries, lateral joins, set
  operations, sublinks), must have its ``namespace`` equated, through top-level ``AND``
  conjuncts of WHERE or JOIN ... ON, to a value — a bound parameter, a constant, or the
  namespace argument ``ns`` of the SQL functions of migrations 0010/0012 — directly or through
  other tenant tables' ``namespace`` (``e.namespace = n.namespace AND n.namespace = $1``).
  Conditions under OR or NOT pin nothing;
- an INSERT into a tenant table names its ``namespace`` column and gives it a value;
- no UPDATE moves a row to another namespace;
- TRUNCATE and COPY of a tenant table are never routable.

Schema statements (ALTER TABLE, CREATE INDEX, LOCK ...) are not routed: a distributed engine
runs them on every shard. A statement that deliberately reads every namespace (an operator's
command, e.g. re-embedding the whole database) carries ``ALL_NAMESPACES`` in its text and is
reported apart, as a fan-out, not as a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from pglast import ast, parse_sql
from pglast.enums import A_Expr_Kind, BoolExprType, SetOperation
from pglast.parser import ParseError

from gql_memory.db.tables import ALL_NAMESPACES, TENANT_TABLES

# The namespace argument of the SQL functions (migrations 0010, 0012): a single value.
NAMESPACE_VARIABLES = frozenset({"ns"})
_DML = (ast.SelectStmt, ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)
# PL/pgSQL hands expressions and assignments to the executor as they are written
# ("decayed := decayed || ARRAY(SELECT ...)"); as SELECTs they parse.
_ASSIGNMENT = re.compile(r"^\s*[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*:?=(?!=)\s*", re.S)


@dataclass(eq=False)
class _Relation:
    """One reference to a table (or CTE, subquery, function) in a FROM list."""

    name: str
    alias: str
    tenant: bool


@dataclass(eq=False)
class _Scope:
    parent: _Scope | None
    relations: list[_Relation] = field(default_factory=list)
    ctes: set[str] = field(default_factory=set)

    def is_cte(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.ctes:
                return True
            scope = scope.parent
        return False

    def by_alias(self, alias: str) -> _Relation | None:
        scope: _Scope | None = self
        while scope is not None:
            for relation in scope.relations:
                if relation.alias == alias:
                    return relation
            scope = scope.parent
        return None

    def owner_of_unqualified_namespace(self) -> _Relation | None:
        """The relation an unqualified ``namespace`` belongs to: the only relation of the
        nearest level that has any, or its only tenant table."""
        scope: _Scope | None = self
        while scope is not None:
            if scope.relations:
                if len(scope.relations) == 1:
                    return scope.relations[0]
                tenants = [r for r in scope.relations if r.tenant]
                return tenants[0] if len(tenants) == 1 else None
            scope = scope.parent
        return None


_VALUE = object()  # the union-find node of "a single value"


class _Check:
    def __init__(self, tenant_tables: frozenset[str]) -> None:
        self.tenant_tables = tenant_tables
        self.parents: dict[object, object] = {}
        self.tenant_references: list[_Relation] = []
        self.problems: list[str] = []

    # --- union-find over namespace columns and the value node ------------------------------

    def _find(self, node: object) -> object:
        self.parents.setdefault(node, node)
        while self.parents[node] is not node:
            self.parents[node] = self.parents[self.parents[node]]
            node = self.parents[node]
        return node

    def _union(self, a: object, b: object) -> None:
        self.parents[self._find(a)] = self._find(b)

    def pinned(self, relation: _Relation) -> bool:
        return self._find(relation) is self._find(_VALUE)

    # --- walking ---------------------------------------------------------------------------

    def visit(self, node: object, scope: _Scope) -> None:
        if isinstance(node, _DML):
            self._level(node, scope)
        elif isinstance(node, ast.TruncateStmt):
            for relation in node.relations or ():
                if relation.relname in self.tenant_tables:
                    self.problems.append(f"TRUNCATE {relation.relname} spans every namespace")
        elif isinstance(node, ast.CopyStmt) and node.relation is not None:
            if node.relation.relname in self.tenant_tables:
                self.problems.append(f"COPY {node.relation.relname} spans every namespace")
        elif isinstance(node, ast.MergeStmt):
            if node.relation.relname in self.tenant_tables:  # not used; not judged either
                self.problems.append(f"MERGE INTO {node.relation.relname} is not checked")
        elif isinstance(node, ast.Node):
            for name in type(node).__slots__:
                self.visit(getattr(node, name), scope)
        elif isinstance(node, list | tuple):
            for item in node:
                self.visit(item, scope)

    def _level(self, stmt: ast.Node, parent: _Scope) -> None:
        scope = _Scope(parent)
        handled = {"withClause", "fromClause", "relation", "usingClause", "larg", "rarg"}
        if stmt.withClause is not None:
            scope.ctes.update(cte.ctename for cte in stmt.withClause.ctes)
            for cte in stmt.withClause.ctes:
                self.visit(cte.ctequery, scope)
        conjuncts: list[ast.Node] = []
        nested: list[object] = []
        items: list[object] = []
        if isinstance(stmt, ast.SelectStmt) and stmt.op != SetOperation.SETOP_NONE:
            nested += [stmt.larg, stmt.rarg]  # each side a level of its own
        elif isinstance(stmt, ast.SelectStmt):
            items = list(stmt.fromClause or ())
        elif isinstance(stmt, ast.UpdateStmt):
            items = [stmt.relation, *(stmt.fromClause or ())]
            for target in stmt.targetList or ():
                if target.name == "namespace":
                    self.problems.append(f"UPDATE {stmt.relation.relname} sets its namespace")
        elif isinstance(stmt, ast.DeleteStmt):
            items = [stmt.relation, *(stmt.usingClause or ())]
        elif isinstance(stmt, ast.InsertStmt) and self._insert_target(stmt):
            # the inserted row: RETURNING may refer to it, pinned to the inserted namespace
            target = stmt.relation
            alias = target.alias.aliasname if target.alias is not None else target.relname
            inserted = _Relation(target.relname, alias, tenant=True)
            scope.relations.append(inserted)
            self._union(inserted, _VALUE)
        for item in items:
            self._from_item(item, scope, conjuncts, nested)
        if getattr(stmt, "whereClause", None) is not None:
            conjuncts.extend(_conjuncts(stmt.whereClause))
        for conjunct in conjuncts:
            self._equality(conjunct, scope)
        for item in nested:
            self.visit(item, scope)
        for name in type(stmt).__slots__:
            if name not in handled:
                self.visit(getattr(stmt, name), scope)

    def _from_item(
        self, item: object, scope: _Scope, conjuncts: list[ast.Node], nested: list[object]
    ) -> None:
        if isinstance(item, ast.RangeVar):
            alias = item.alias.aliasname if item.alias is not None else item.relname
            if item.schemaname is None and scope.is_cte(item.relname):
                scope.relations.append(_Relation(item.relname, alias, tenant=False))
                return
            relation = _Relation(item.relname, alias, item.relname in self.tenant_tables)
            scope.relations.append(relation)
            if relation.tenant:
                self.tenant_references.append(relation)
        elif isinstance(item, ast.JoinExpr):
            self._from_item(item.larg, scope, conjuncts, nested)
            self._from_item(item.rarg, scope, conjuncts, nested)
            if item.quals is not None:
                conjuncts.extend(_conjuncts(item.quals))
                nested.append(item.quals)
        elif isinstance(item, ast.RangeSubselect):
            alias = item.alias.aliasname if item.alias is not None else ""
            scope.relations.append(_Relation("(subquery)", alias, tenant=False))
            nested.append(item.subquery)
        elif isinstance(item, ast.RangeFunction):
            alias = item.alias.aliasname if item.alias is not None else ""
            scope.relations.append(_Relation("(function)", alias, tenant=False))
            nested.append(item.functions)
        else:
            nested.append(item)

    def _insert_target(self, stmt: ast.InsertStmt) -> bool:
        """Whether an INSERT into a tenant table inserts one namespace value (reported if
        not)."""
        table = stmt.relation.relname
        if table not in self.tenant_tables:
            return False
        columns = [c.name for c in stmt.cols or ()]
        if "namespace" not in columns:
            self.problems.append(f"INSERT INTO {table} does not name its namespace")
            return False
        position = columns.index("namespace")
        source = stmt.selectStmt
        rows: list[Iterable[object]] = []
        if source is not None and source.valuesLists:
            rows = list(source.valuesLists)
        elif source is not None and source.op == SetOperation.SETOP_NONE:
            rows = [[t.val for t in source.targetList or ()]]
        if not rows or any(not _is_value(list(row)[position]) for row in rows):
            self.problems.append(f"INSERT INTO {table} does not insert one namespace value")
            return False
        return True

    def _equality(self, conjunct: ast.Node, scope: _Scope) -> None:
        if not (
            isinstance(conjunct, ast.A_Expr)
            and conjunct.kind == A_Expr_Kind.AEXPR_OP
            and conjunct.name[-1].sval == "="  # also OPERATOR(pg_catalog.=)
        ):
            return
        sides = [self._namespace_node(side, scope) for side in (conjunct.lexpr, conjunct.rexpr)]
        if all(side is not None for side in sides):
            self._union(sides[0], sides[1])

    def _namespace_node(self, expression: object, scope: _Scope) -> object | None:
        """The union-find node of one side of an equality: a namespace column, a value, or
        None when it is neither."""
        if _is_value(expression):
            return _VALUE
        while isinstance(expression, ast.TypeCast):  # "namespace"::text
            expression = expression.arg
        if not isinstance(expression, ast.ColumnRef):
            return None
        names = [f.sval for f in expression.fields if isinstance(f, ast.String)]
        if not names or names[-1] != "namespace":
            return None
        if len(names) == 1:
            owner = scope.owner_of_unqualified_namespace()
        else:
            owner = scope.by_alias(names[-2])
        return owner if owner is not None else object()  # unknown: pins nothing


def _is_value(expression: object) -> bool:
    if isinstance(expression, ast.TypeCast):
        return _is_value(expression.arg)
    if isinstance(expression, ast.ParamRef | ast.A_Const):
        return True
    if isinstance(expression, ast.ColumnRef) and len(expression.fields) == 1:
        only = expression.fields[0]
        return isinstance(only, ast.String) and only.sval in NAMESPACE_VARIABLES
    return False


def _conjuncts(expression: ast.Node) -> Iterator[ast.Node]:
    if isinstance(expression, ast.BoolExpr) and expression.boolop == BoolExprType.AND_EXPR:
        for argument in expression.args:
            yield from _conjuncts(argument)
    else:
        yield expression


def _parse(sql: str) -> list[object]:
    """The statements of ``sql``; PL/pgSQL expressions and assignments as SELECTs."""
    attempts = [sql, f"SELECT {sql}"]
    if _ASSIGNMENT.match(sql):
        attempts.append(f"SELECT {_ASSIGNMENT.sub('', sql, count=1)}")
    error: ParseError | None = None
    for attempt in attempts:
        try:
            return [raw.stmt for raw in parse_sql(attempt)]
        except ParseError as exc:
            error = error or exc
    assert error is not None
    raise error


def mentions_tenant_table(sql: str, tenant_tables: Iterable[str] = TENANT_TABLES) -> bool:
    words = set(re.findall(r"[a-z_]+", sql.lower()))
    return bool(words & set(tenant_tables))


def unrouted(sql: str, tenant_tables: Iterable[str] = TENANT_TABLES) -> list[str]:
    """Why ``sql`` cannot be routed to the shard of one namespace (empty: it can, or it
    touches no tenant table). A statement that does not parse is unroutable if it names a
    tenant table."""
    tables = frozenset(tenant_tables)
    try:
        statements = _parse(sql)
    except ParseError as exc:
        if mentions_tenant_table(sql, tables):
            return [f"does not parse ({exc}) and names a tenant table"]
        return []
    check = _Check(tables)
    for statement in statements:
        check.visit(statement, _Scope(None))
    problems = list(check.problems)
    for relation in check.tenant_references:
        if not check.pinned(relation):
            shown = relation.name if relation.alias == relation.name else relation.alias
            problems.append(f"{relation.name} ({shown}) is not pinned to one namespace")
    return problems


def reads_every_namespace(sql: str) -> bool:
    """The statement is marked as a deliberate read of every namespace (a fan-out)."""
    return ALL_NAMESPACES in sql
