"""The model layer's seam for services, and the sentence embedder."""
