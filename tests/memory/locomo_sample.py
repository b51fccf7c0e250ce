"""A tiny LoCoMo-shaped transcript (two samples, three sessions, one image turn) for tests;
the real data set stays out of the repository (CC BY-NC, evaluation only)."""

from __future__ import annotations

from typing import Any

LOCOMO: list[dict[str, Any]] = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "Hey Mel! How are you?"},
                {
                    "speaker": "Melanie",
                    "dia_id": "D1:2",
                    "text": "Great, look at this!",
                    "img_url": ["https://example.invalid/x.jpg"],
                    "blip_caption": "a photo of a dog on a beach",
                },
            ],
            "session_2_date_time": "10:04 am on 19 June, 2023",
            "session_2": [
                {"speaker": "Caroline", "dia_id": "D2:1", "text": "I went to a support group."},
            ],
        },
        "qa": [{"question": "q", "answer": "a", "evidence": ["D1:1"], "category": 4}],
    },
    {
        "sample_id": "conv-2",
        "conversation": {
            "speaker_a": "Jon",
            "speaker_b": "Gina",
            "session_1_date_time": "9:00 am on 1 January, 2024",
            "session_1": [{"speaker": "Jon", "dia_id": "D1:1", "text": "Happy new year"}],
        },
    },
]
