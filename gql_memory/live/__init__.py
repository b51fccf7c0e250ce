"""Live events: this process's subscriber hub and the LISTEN connection that feeds it."""
