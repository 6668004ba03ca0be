"""The pack's policies, one module per family; ``policies/__main__.py`` assembles them."""
