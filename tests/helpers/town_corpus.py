"""A small BEIR folder of encyclopedia-style passages about made-up towns, written by the tests.

Why: the README's own-corpus quick start must run on a corpus a user could have, with no file
from outside the checkout. Each town has five passages (geography, economy, history, culture,
transport) built from fixed word lists with a seeded generator, so the same call writes the
same bytes. Questions ask for one fact of one passage: half name the town, half only a detail
(a year, a count, a road number) among forty passages of the same shape, which BM25 matches and
the dense encoder often misses, so the two arms of the default pair (keep: dense -> rerank,
hybrid: BM25 + dense -> rerank) do not agree everywhere, as on real data.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HEADS = ["Ash", "Bel", "Cor", "Dun", "Elm", "Fen", "Glen", "Hart", "Ives", "Kel", "Lyn", "Mar", "Nor", "Oak",
         "Pen", "Rad", "Sel", "Thorn", "Ul", "Wex"]
TAILS = ["bury", "mere", "wick", "ford", "stow", "combe", "ham", "ley", "thorpe", "by"]
RIVERS = ["Avon", "Teme", "Wye", "Ouse", "Lune", "Dart", "Tamar", "Exe", "Kennet", "Derwent", "Eden", "Tees"]
CITIES = ["Hereford", "Lincoln", "Carlisle", "Exeter", "Norwich", "Durham", "Chester", "Worcester", "Bath", "York"]
TERRAIN = [("chalk downland", "sheep grazing"), ("clay vale", "dairy farming"), ("river meadows", "hay and willow"),
           ("heath", "forestry"), ("limestone hills", "quarrying"), ("orchard country", "cider apples")]
INDUSTRY = [("wool weaving", "textile mill"), ("glass making", "glassworks"), ("brewing", "brewery"),
            ("paper making", "paper mill"), ("boat building", "shipyard"), ("brick making", "brickworks"),
            ("lace making", "lace factory"), ("clock making", "clock factory"), ("tanning", "tannery")]
FAMILIES = ["Mortimer", "Despenser", "Beauchamp", "Neville", "Percy", "Talbot", "Courtenay", "Stafford"]
KINGS = ["Henry the Second", "King John", "Edward the First", "Richard the Second", "Henry the Fifth"]
FESTIVALS = [("lantern", "the end of the harvest", "October"), ("kite", "the spring winds", "April"),
             ("cheese", "the dairy farmers of the vale", "June"), ("bell", "the restoration of the church bells", "May"),
             ("boat", "the river trade", "August"), ("apple", "the orchards and the first cider", "September"),
             ("candle", "midwinter", "December"), ("hiring", "the old labour fairs", "November")]
COLLECTIONS = ["Roman coins", "medieval pottery", "fossil ammonites", "painted shop signs", "early photographs",
               "clocks and watches", "farm tools", "embroidered samplers"]
BRIDGES = ["stone", "iron", "timber", "brick", "suspension"]


def towns(n: int) -> list[str]:
    """``n`` distinct town names, the same for every call."""
    names = [h + t.lower() for t in TAILS for h in HEADS]
    return random.Random(7).sample(names, n)


def _facts(rng: random.Random, town: str) -> dict:
    terrain, land = rng.choice(TERRAIN)
    industry, facility = rng.choice(INDUSTRY)
    festival, celebrates, month = rng.choice(FESTIVALS)
    city, other = rng.sample(CITIES, 2)
    year = rng.randrange(1050, 1300)
    return {"town": town, "river": rng.choice(RIVERS), "bank": rng.choice(["north", "south", "east", "west"]),
            "dist": rng.randrange(4, 40), "dir": rng.choice(["north", "south", "east", "west"]), "city": city,
            "other": other, "terrain": terrain, "land": land, "industry": industry, "facility": facility,
            "opened": rng.randrange(1780, 1960), "staff": rng.randrange(40, 900), "year": year,
            "family": rng.choice(FAMILIES), "king": rng.choice(KINGS), "fire": year + rng.randrange(200, 500),
            "festival": festival, "celebrates": celebrates, "month": month, "collection": rng.choice(COLLECTIONS),
            "museum": rng.randrange(1880, 1990),
            "station": rng.randrange(1838, 1900), "bridge": rng.choice(BRIDGES), "built": rng.randrange(1700, 1930),
            "road": f"A{rng.randrange(30, 499)}"}


# (aspect, passage, questions): each question is answered by its passage alone; the first names
# the town, the second only a detail (a number, a road) that the town's neighbours' passages of
# the same aspect lack
ASPECTS = [
    ("geography",
     "{town} lies on the {bank} bank of the River {river}, {dist} kilometres {dir} of {city}. The surrounding "
     "{terrain} is used mostly for {land}, and the parish boundary follows an old drainage ditch.",
     ["Which river does {town} stand on?", "Which town is {dist} kilometres {dir} of {city}?"]),
    ("economy",
     "The economy of {town} has long depended on {industry}. In {opened} a {facility} opened beside the market "
     "place, and it still employs about {staff} people, most of them from the surrounding villages.",
     ["What industry is {town} known for?", "Which factory employs about {staff} people?"]),
    ("history",
     "{town} was first recorded in {year} as a manor held by the {family} family. It was granted a market "
     "charter by {king}, and much of the old centre was destroyed by a great fire in {fire}.",
     ["Which family held the manor of {town}?", "Which manor was first recorded in {year}?"]),
    ("culture",
     "Every {month} {town} holds a {festival} festival celebrating {celebrates}. The town museum, opened in {museum} "
     "in a former chapel, keeps a collection of {collection} found in the district.",
     ["What festival takes place in {town} every {month}?", "Which museum of {collection} opened in {museum}?"]),
    ("transport",
     "{town} railway station opened in {station} on the line between {city} and {other}. A {bridge} bridge "
     "built in {built} carries the {road} road across the {river} just outside the town.",
     ["When did the railway station in {town} open?", "Where does the {road} road cross a river?"]),
]


def write_town_corpus(root: Path, n_towns: int = 40, n_questions: int = 40, seed: int = 0) -> Path:
    """corpus.jsonl (five passages per town, titled with the town), queries.jsonl and
    qrels/test.tsv (one relevant passage per question) under ``root``."""
    rng = random.Random(seed)
    corpus, questions = [], []
    for town in towns(n_towns):
        facts = _facts(rng, town)
        for aspect, text, asks in ASPECTS:
            pid = f"{town.lower()}-{aspect}"
            corpus.append({"_id": pid, "title": town, "text": text.format(**facts)})
            questions.append((pid, [a.format(**facts) for a in asks]))
    picked = rng.sample(questions, n_questions)
    queries = [{"_id": f"q{i}", "text": rng.choice(asks)} for i, (_, asks) in enumerate(picked)]
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    rows = "".join(f"q{i}\t{pid}\t1\n" for i, (pid, _) in enumerate(picked))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows, encoding="utf-8")
    return root
