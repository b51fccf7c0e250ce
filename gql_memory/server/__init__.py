"""HTTP: the app factory, the GraphQL view and its transport policy, middleware, metrics,
logs and the browser UIs."""
