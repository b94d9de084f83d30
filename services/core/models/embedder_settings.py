"""The embedder's settings section (``PLAUDIT_EMBEDDER_<FIELD>``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class EmbedderSettings(BaseModel):
    """The sentence embedder shared by the diversity channel and future retrieval."""

    model: str = Field(
        default="bundled",
        description="sentence-transformers directory, or 'bundled' for all-MiniLM-L6-v2",
    )
    device: str = "cpu"
    batch_size: int = Field(default=64, ge=1, description="texts per model forward pass")
    max_items: int = Field(default=512, ge=1, description="texts gathered per micro-batch")
    max_wait_ms: float = Field(
        default=5.0, ge=0, description="how long a micro-batch waits for more requests"
    )
