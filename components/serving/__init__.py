"""Model serving: tiers, vLLM model servers, KEDA, the LiteLLM gateway and each namespace's network isolation."""
