"""A LlamaIndex Memory block over our context: LlamaIndex's own Memory and MockLLM (which
answers with the prompt it was sent, so the test sees what memory put into it)."""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory

from gql_memory import AsyncMemoryStore, MemoryStore
from gql_memory.integrations.llama_index import MemoryBlock


def words(text: str) -> list[str]:
    """Memory's tokenizer here: words (its default, tiktoken, may want to download)."""
    return text.split()


def memory(block: MemoryBlock, session_id: str) -> Memory:
    """A short-term queue of ~40 words: older messages flush into the block."""
    return Memory.from_defaults(
        session_id=session_id,
        token_limit=40,
        chat_history_token_ratio=0.5,
        token_flush_size=10,
        tokenizer_fn=words,
        memory_blocks=[block],
    )


async def test_the_block_stores_what_it_is_given_and_returns_our_context(
    async_store: AsyncMemoryStore,
) -> None:
    block = MemoryBlock(store=async_store, max_tokens=200)
    await block.aput(
        [
            ChatMessage(role="user", content="My cat is called Miso"),
            ChatMessage(role="assistant", content="Miso is a lovely name"),
            ChatMessage(role="assistant", content=""),  # a tool call: no text, not stored
        ],
        session_id="chat",
    )
    turns = (await async_store.raw.list(session_id="chat")).items
    assert [(t.speaker, t.content) for t in reversed(turns)] == [
        ("user", "My cat is called Miso"),
        ("assistant", "Miso is a lovely name"),
    ]
    text = await block.aget([ChatMessage(role="user", content="what is my cat called?")])
    assert "My cat is called Miso" in text
    context = await async_store.context("what is my cat called?", max_tokens=200)
    assert text == context.text
    assert await block.aget([]) == ""
    assert await block.atruncate("aaaa\nbbbb\ncccc", 1) == "aaaa\nbbbb"  # the last lines go
    assert await block.atruncate("aaaa", 5) is None


async def test_memory_with_our_block_and_a_mock_llm(async_store: AsyncMemoryStore) -> None:
    block = MemoryBlock(store=async_store, max_tokens=300)
    first = memory(block, "chat-1")
    for i, fact in enumerate(["My cat is called Miso", "I live in Lisbon", "I cycle to work"]):
        await first.aput(ChatMessage(role="user", content=f"{fact}. " + "filler " * 8 + str(i)))
        await first.aput(ChatMessage(role="assistant", content="Noted. " + "filler " * 8))
    flushed = (await async_store.raw.list(session_id="chat-1")).items
    assert any("Miso" in t.content for t in flushed)  # the queue overflowed into our block
    # a new Memory (empty short-term queue) for the same session: the block remembers
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory(block, "chat-1"))
    answer = await engine.achat("What is my cat called?")
    assert "My cat is called Miso" in answer.response  # MockLLM echoes the prompt it got


def test_a_synchronous_store_and_memory(sync_store: MemoryStore) -> None:
    block = MemoryBlock(store=sync_store, session_id="notes", max_tokens=200)
    chat = memory(block, "ignored: the block names its session")
    said = "Remember the code word: heron. " + "filler " * 8
    chat.put_messages([ChatMessage(role="user", content=said) for _ in range(4)])
    assert sync_store.raw.list(session_id="notes").items
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory(block, "other"))
    assert "heron" in engine.chat("What is the code word?").response
