"""Dashboard pages: thin views over ``flare_core`` and the run store."""
