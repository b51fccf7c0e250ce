"""Framework adapters: our memory behind the interfaces agent frameworks already use.

One module per framework, each importing its framework (installed by the extra of the same
name: ``pip install 'gql-memory[langgraph]'``); nothing here is imported by the package
itself, so the base install and import stay free of them.

- ``openai_agents.MemorySession``: the OpenAI Agents SDK ``Session`` over raw dialogue
- ``langgraph.LangGraphStore``: LangGraph's ``BaseStore`` over insights and graph nodes
- ``llama_index.MemoryBlock``: a LlamaIndex ``Memory`` block over ``context``
"""
