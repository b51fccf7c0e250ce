"""Relay-style pagination: the generic Connection, its edges and PageInfo, and paging args."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

import strawberry

from gql_memory.memory.pagination import Page

T = TypeVar("T")

FirstArg = Annotated[
    int | None, strawberry.argument(description="Page size (default 100, at most 1000).")
]
AfterArg = Annotated[str | None, strawberry.argument(description="Return items after this cursor.")]


@strawberry.type(description="Where a page of a connection sits in the whole list.")
class PageInfo:
    has_next_page: bool = strawberry.field(description="More items follow this page.")
    has_previous_page: bool = strawberry.field(description="This page was asked for `after` one.")
    start_cursor: str | None = strawberry.field(description="Cursor of the first item.")
    end_cursor: str | None = strawberry.field(
        description="Cursor of the last item; pass it as `after` for the next page."
    )


# GraphQL names it "<Item>Edge" (InsightEdge...); the graph's own Edge is api/graph.py's.
@strawberry.type(name="Edge", description="An item of a page, with the cursor that points at it.")
class ConnectionEdge(Generic[T]):
    node: T = strawberry.field(description="The item.")
    cursor: str = strawberry.field(description="Opaque cursor of this item.")


@strawberry.type(description="A page of a newest-first list (Relay-style connection).")
class Connection(Generic[T]):
    edges: list[ConnectionEdge[T]] = strawberry.field(description="The items of this page.")
    page_info: PageInfo = strawberry.field(description="Pagination state.")


def to_connection(page: Page[Any], convert: Any) -> Connection[Any]:
    """Wrap a domain page, converting each item with ``convert.from_domain``."""
    return Connection(
        edges=[
            ConnectionEdge(node=convert.from_domain(item), cursor=cursor)
            for item, cursor in zip(page.items, page.cursors, strict=True)
        ],
        page_info=PageInfo(
            has_next_page=page.has_next_page,
            has_previous_page=page.has_previous_page,
            start_cursor=page.start_cursor,
            end_cursor=page.end_cursor,
        ),
    )
