"""Short documents for synthesis tests (written for these tests)."""

from __future__ import annotations

DOCS = [
    {
        "id": "photosynthesis",
        "text": "Photosynthesis is the process by which green plants convert sunlight into "
        "chemical energy stored in glucose. It takes place mainly in the chloroplasts of leaf "
        "cells, where chlorophyll absorbs red and blue light. Oxygen is released as a "
        "by-product, which is why forests are vital for the atmosphere.",
    },
    {
        "id": "volcano",
        "text": "A volcano is an opening in the crust of a planet through which molten rock, "
        "ash and gases escape from below the surface. Eruptions are driven by pressure from "
        "magma chambers deep underground. Famous examples include Vesuvius, which buried "
        "Pompeii in the year 79, and Krakatoa, whose explosion in 1883 was heard thousands "
        "of kilometres away.",
    },
    {
        "id": "baroque",
        "text": "Baroque music is a style of Western classical music composed from about 1600 "
        "to 1750. Composers such as Johann Sebastian Bach, Antonio Vivaldi and George "
        "Frideric Handel wrote concertos, operas and oratorios with elaborate ornamentation. "
        "The harpsichord and the basso continuo were characteristic features of the period.",
    },
    {
        "id": "inflation",
        "text": "Inflation is the general increase in the prices of goods and services in an "
        "economy over time. Central banks usually try to keep it low and stable by raising "
        "or lowering interest rates. High inflation erodes the purchasing power of savings, "
        "while deflation can discourage spending and investment.",
    },
    {"id": "stub", "text": "Paris is a city. It is large."},
    {
        "id": "garbled",
        "text": "GARBLED notes about a topic that the generator cannot turn into JSON at all. "
        "The text is long enough to pass the filter, with several sentences of plain prose "
        "about rivers, mountains, valleys, weather and the seasons of the northern lands. "
        "It should still be rejected at the generation stage.",
    },
]
