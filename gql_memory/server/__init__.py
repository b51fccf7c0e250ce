"""HTTP: the app factory, the GraphQL view and its transport policy, authentication,
middleware with the typed request state, metrics, logs and the browser UIs."""
