"""Seeded pages in English, Italian, Spanish and German for the language tests: templated
sentences over a small vocabulary per language (written for these tests, never real corpora),
long and varied enough to pass clean's default rules apart from the language-specific ones."""

from __future__ import annotations

import numpy as np

VOCAB = {
    "en": {
        "a": "old young quiet bright small green cold warm dark gentle".split(),
        "n": "farmer river bridge teacher garden window market letter village doctor".split(),
        "v": "watched crossed painted visited opened closed found carried followed built".split(),
        "p": "at_home by_the_sea in_town after_dinner at_night in_spring at_dawn".split(),
        "t": (
            "The {a} {n} {v} the {n2} {p} with a friend.",
            "A {n} was {a} because the {n2} {v} it to us.",
            "Every morning the {n} {v} a {a} {n2} {p}.",
            "When the {n} {v} the {n2}, it was {a} and still.",
        ),
    },
    "it": {
        "a": "vecchio giovane tranquillo piccolo verde freddo caldo scuro gentile antico".split(),
        "n": "contadino fiume ponte maestro giardino mercato villaggio medico paese libro".split(),
        "v": "guardava attraversava dipingeva visitava apriva chiudeva trovava portava".split(),
        "p": "a_casa al_mare in_città dopo_cena di_notte in_primavera all'alba".split(),
        "t": (
            "Il {n} {a} {v} il {n2} vicino {p}.",
            "Un {n} era {a} perché il {n2} lo {v} ogni giorno.",
            "Ogni mattina il {n} {v} un {n2} {a} {p}.",
            "Quando il {n} {v} il {n2}, tutto era {a}.",
        ),
    },
    "es": {
        "a": "viejo joven tranquilo pequeño verde frío cálido oscuro amable antiguo".split(),
        "n": "campesino río puente maestro jardín mercado pueblo médico camino libro".split(),
        "v": "miraba cruzaba pintaba visitaba abría cerraba encontraba llevaba seguía".split(),
        "p": "en_casa junto_al_mar en_Madrid tras_la_cena de_noche en_primavera".split(),
        "t": (
            "El {n} {a} {v} el {n2} cerca {p}.",
            "Un {n} estaba {a} porque el {n2} lo {v} {p}.",
            "Por la mañana el {n} {v} un {n2} {a} {p}.",
            "Cuando el {n} {v} el {n2}, todo estaba {a}.",
        ),
    },
    "de": {
        "a": "alte junge ruhige kleine grüne kalte warme dunkle freundliche stille".split(),
        "n": "Bauer Fluss Lehrer Garten Markt Brief Arzt Weg Nachbar Förster".split(),
        "v": "beobachtete überquerte malte besuchte öffnete schloss fand trug baute".split(),
        "p": "zu_Hause am_Meer in_Berlin abends nachts im_Frühling".split(),
        "t": (
            "Der {a} {n} {v} den {n2} {p}.",
            "Ein {n} war {a}, weil der {n2} ihn {p} {v}.",
            "Am Morgen {v} der {n} einen {a} {n2} {p}.",
            "Als der {n} den {n2} {v}, war alles {a}.",
        ),
    },
}
LANGS = tuple(VOCAB)


def page(lang: str, rng: np.random.Generator, sentences: int = 12) -> str:
    """One page of `sentences` seeded sentences in `lang`, in two paragraphs."""
    v = VOCAB[lang]

    def pick(key: str) -> str:
        return v[key][int(rng.integers(len(v[key])))]

    out = []
    start = int(rng.integers(len(v["t"])))
    for k in range(sentences):
        t = v["t"][(start + k) % len(v["t"])]  # every template, from a seeded start
        p = pick("p").replace("_", " ")  # a place or time of several words
        out.append(t.format(a=pick("a"), n=pick("n"), n2=pick("n"), v=pick("v"), p=p))
    half = sentences // 2
    return " ".join(out[:half]) + "\n\n" + " ".join(out[half:])


def pages(langs: list[str], seed: int) -> list[str]:
    """One page per entry of `langs`, in that order."""
    rng = np.random.default_rng(seed)
    return [page(lang, rng) for lang in langs]
