#!/usr/bin/env python3
"""A synthetic knowledge-update suite in LongMemEval's style: multi-session chats in which a person's
facts change (stated, updated in other words, corrected, changed twice), with small talk around them,
and questions for the current value (in the present tense, and again in the past tense as people also ask
it: "Where did Ana move to most recently?"), for the value on an earlier date ("as of") and for facts never
mentioned ("I don't know"), and for an earlier value with the time in the question's words ("dated": "as of 8
December 2023"; "before": "Which company did Bram work for before Quarry Bank?").

    python benchmarks/updates_suite.py OUT_DIR [--people 24] [--seed 7]

writes ``OUT_DIR/<conversation>.json`` (memcli's chat-message format: one user, timestamps) and
``OUT_DIR/questions.jsonl``. Every slot belongs to one half (``tune`` or ``report``) with its own
phrasings: constants are chosen on the tune half's slots and reported on the other's, so a rule that
names one half's wording does not carry over.

Nothing here is LoCoMo's text; the people, places and values are made up.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path


@dataclass(frozen=True)
class Slot:
    name: str
    half: str  # "tune" or "report"
    question: str  # {n}: the person
    past: str  # the current value asked in the past tense, as people ask it ("Where did {n} move to most recently?")
    stated: tuple[str, ...]  # first mention; {v}: the value
    changed: tuple[str, ...]  # an update; {v}: new value, {o}: old value
    corrected: tuple[str, ...]  # a correction a few minutes later
    values: tuple[str, ...]


SLOTS = [
    Slot("city", "tune", "Where does {n} live now?", "Where did {n} move to most recently?",
         ("I live in {v}.", "My flat in {v} is small but the neighbourhood is lovely.", "Home is {v} for me these days."),
         ("We just moved to {v}!", "I relocated to {v} last month for a fresh start.", "Big news: I'm living in {v} now."),
         ("Sorry, I said {o} but I meant {v}.",),
         ("Lisbon", "Denver", "Osaka", "Leeds", "Tallinn", "Porto", "Calgary", "Nantes")),
    Slot("employer", "report", "Which company does {n} work for?", "Which company did {n} join last?",
         ("I work at {v} as a data analyst.", "My job at {v} keeps me pretty busy.", "I've been at {v} for three years."),
         ("I handed in my notice and joined {v}.", "Starting Monday I'm an employee of {v}.",
          "New job alert: {v} hired me!"),
         ("Correction: the company is {v}, not {o}.",),
         ("Northwind", "Helix Labs", "Bluefin Systems", "Quarry Bank", "Orbital Foods", "Tessel", "Mapleworks")),
    Slot("diet", "tune", "What is {n}'s current diet?", "What diet did {n} switch to most recently?",
         ("I'm {v} these days.", "I eat {v}, it just works for me.", "Been {v} for a while now."),
         ("So I've gone {v}.", "I switched to eating {v}.", "Lately it's {v} meals only for me."),
         ("Wait, I meant {v}, not {o}.",),
         ("vegetarian", "vegan", "keto", "pescatarian", "paleo")),
    Slot("car", "report", "What car does {n} drive?", "What car did {n} get most recently?",
         ("I drive a {v}.", "My {v} has never let me down.", "I commute in my old {v}."),
         ("I sold the {o} and bought a {v}.", "Picked up my new {v} from the dealer today.",
          "The {v} is my daily driver now."),
         ("Oops, it's a {v}, not a {o}.",),
         ("Honda Civic", "Subaru Outback", "Tesla Model 3", "Ford Fiesta", "Volvo V60", "Mazda CX-5")),
    Slot("meeting", "tune", "Which day is {n}'s weekly team meeting?", "Which day was {n}'s team meeting set to last?",
         ("Our weekly team meeting is on {v}.", "Every {v} we have the team sync.", "Team meeting day is {v}."),
         ("The team meeting moved to {v}.", "From now on the weekly sync happens on {v}.",
          "They rescheduled our standing meeting to {v}."),
         ("Sorry, {v} not {o} for the meeting.",),
         ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")),
    Slot("rent", "report", "How much rent does {n} pay?", "How much was {n}'s rent when it last came up?",
         ("My rent is {v}.", "I pay {v} for the apartment.", "Rent costs me {v}, ouch."),
         ("The landlord raised it, I now pay {v}.", "New lease signed at {v}.", "Housing went up to {v} this year."),
         ("Actually the rent is {v}, I misremembered {o}.",),
         ("£1,150 a month", "£1,420 a month", "$2,300 a month", "£980 a month", "$1,875 a month")),
    Slot("sport", "tune", "Which sport does {n} play?", "Which sport did {n} take up most recently?",
         ("I play {v} every weekend.", "{v} is my way to unwind.", "I'm in a local {v} league."),
         ("I quit {o} and took up {v}.", "These days it's all {v} for me.", "Joined a {v} club last week."),
         ("No wait, it's {v}, not {o}.",),
         ("tennis", "volleyball", "badminton", "rugby", "squash", "cricket")),
    Slot("database", "report", "What database does {p} run on?", "What database did {p} end up on?",
         ("{p} runs on {v}.", "We keep all of {p}'s data in {v}.", "{p} uses {v} for storage."),
         ("We migrated {p} from {o} to {v}.", "{p} is on {v} since the migration.",
          "Finished moving {p} over to {v} yesterday."),
         ("Correction: {p} is on {v}, not {o}.",),
         ("Postgres 15", "MySQL 8", "SQLite", "MongoDB", "CockroachDB", "MariaDB")),
    Slot("partner", "tune", "Who is {n}'s partner?", "Who was {n} with most recently?",
         ("My partner {v} is a nurse.", "{v} and I have been together two years.", "I'm dating {v}."),
         ("{o} and I split up; I'm with {v} now.", "I met someone new, {v}, and we're official.",
          "{v} moved in with me last week."),
         ("Sorry, their name is {v}, not {o}.",),
         ("Jordan", "Alexis", "Sam", "Robin", "Taylor", "Morgan", "Casey")),
    Slot("deadline", "report", "When is {n}'s thesis due?", "What was the latest due date of {n}'s thesis?",
         ("My thesis is due on {v}.", "The thesis deadline is {v}.", "I have to submit the thesis by {v}."),
         ("The thesis deadline got pushed to {v}.", "My supervisor extended the thesis to {v}.",
          "Good news, the thesis is now due {v}."),
         ("Sorry, {v}, not {o}, for the thesis.",),
         ("March 3", "April 18", "May 29", "June 12", "July 7", "September 21")),
    Slot("pet", "tune", "What pet does {n} have?", "What pet did {n} get most recently?",
         ("I have a {v} at home.", "My {v} keeps me company.", "Feeding my {v} is the first thing I do."),
         ("We rehomed the {o} and adopted a {v}.", "Meet my new {v}!", "The new {v} runs the house now."),
         ("I mean a {v}, not a {o}.",),
         ("cat", "parrot", "rabbit", "hamster", "beagle", "tortoise")),
    Slot("phone", "report", "What phone does {n} use?", "What phone did {n} switch to last?",
         ("I use a {v}.", "My {v} battery is still decent.", "Texting you from my {v}."),
         ("Upgraded to a {v}.", "Dropped the {o} in a lake, so now I have a {v}.", "The {v} arrived today."),
         ("It's a {v}, not a {o}, my mistake.",),
         ("Pixel 8", "iPhone 13", "Galaxy S22", "Fairphone 5", "Moto G84")),
]

# Each slot's value asked with the time in the question's words (after the other kinds: the suite's questions of
# 2026-12-06 and before are unchanged): on a day ({when}: "as of 8 December 2023" in the tune half, "on December 8,
# 2023" in the report half), before a value ({v}: the current one; the answer is the one it replaced) and the
# previous value (the same answer).
WRITTEN = {
    "city": ("Where did {n} live {when}?", "Where did {n} live before {v}?", "Where did {n} live previously?"),
    "employer": ("Which company did {n} work for {when}?", "Which company did {n} work for before {v}?",
                 "Which company was {n}'s previous employer?"),
    "diet": ("What diet was {n} on {when}?", "What diet was {n} on before going {v}?", "What was {n}'s previous diet?"),
    "car": ("What car did {n} drive {when}?", "What car did {n} drive before the {v}?", "What car did {n} drive previously?"),
    "meeting": ("Which day was {n}'s weekly team meeting {when}?", "Which day was {n}'s team meeting before {v}?",
                "Which day was {n}'s team meeting previously?"),
    "rent": ("How much rent did {n} pay {when}?", "How much rent did {n} pay before it was {v}?",
             "What was {n}'s previous rent?"),
    "sport": ("Which sport did {n} play {when}?", "Which sport did {n} play before {v}?", "Which sport did {n} play previously?"),
    "database": ("What database did {p} use {when}?", "What database did {p} use before {v}?",
                 "What was {p}'s previous database?"),
    "partner": ("Who was {n}'s partner {when}?", "Who was {n} with before {v}?", "Who was {n}'s previous partner?"),
    "deadline": ("When was {n}'s thesis due {when}?", "When was {n}'s thesis due before it moved to {v}?",
                 "When was {n}'s thesis previously due?"),
    "pet": ("What pet did {n} have {when}?", "What pet did {n} have before the {v}?", "What was {n}'s previous pet?"),
    "phone": ("What phone did {n} use {when}?", "What phone did {n} use before the {v}?", "What phone did {n} use previously?"),
}


def written_day(day: datetime, half: str) -> str:
    """A day as a question writes it, in each half's own words."""
    if half == "tune":
        return f"as of {day.day} {day:%B %Y}"
    return f"on {day:%B} {day.day}, {day.year}"


PEOPLE = ["Ana", "Bram", "Chidi", "Dalia", "Emre", "Fiona", "Goran", "Hana", "Idris", "Jun", "Kofi", "Lena",
          "Mateo", "Nadia", "Olek", "Priti", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wes", "Yara"]
PROJECTS = ["ledgerd", "quillbox", "tidepool", "farecast", "gridline", "hopper", "nimbus", "orchard"]
SMALL_TALK = [
    "Long week, I'm glad it's almost over.", "Any good podcast suggestions?", "The weather has been wild lately.",
    "I finally finished that book I told you about.", "Making soup tonight, wish me luck.",
    "Do you think I should learn to play piano?", "My cousin visited over the weekend.",
    "I keep forgetting to water the plants.", "Can you help me plan a short trip?", "Just got back from a walk.",
]
REPLIES = ["That sounds great!", "Thanks for sharing that.", "Good to know, tell me more.", "Happy to help with that.",
           "Interesting! How do you feel about it?", "Noted."]


def build(people: int, seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    conversations, questions = [], []
    for k in range(people):
        person = PEOPLE[k % len(PEOPLE)]
        project = PROJECTS[k % len(PROJECTS)]
        slots = rng.sample(SLOTS, 5)
        mentioned, unmentioned = slots[:4], slots[4]
        start = datetime(2023, 1, 9) + timedelta(days=rng.randrange(300))
        days = sorted(rng.sample(range(1, 200), 5))
        sessions = [[] for _ in range(6)]  # (kind, slot, value, old) events per session
        history: dict[str, list[tuple[int, str]]] = {}
        for slot in mentioned:
            values = rng.sample(slot.values, 3)
            first = rng.randrange(0, 3)
            kind = rng.choice(["update", "update", "double", "correction"])
            sessions[first].append(("stated", slot, values[0], None))
            history[slot.name] = [(first, values[0])]
            if kind == "correction":
                sessions[first].append(("corrected", slot, values[1], values[0]))
                history[slot.name] = [(first, values[1])]
                later = rng.randrange(first + 1, 6)
                sessions[later].append(("changed", slot, values[2], values[1]))
                history[slot.name].append((later, values[2]))
                continue
            later = rng.randrange(first + 1, 5 if kind == "double" else 6)
            sessions[later].append(("changed", slot, values[1], values[0]))
            history[slot.name].append((later, values[1]))
            if kind == "double":
                last = rng.randrange(later + 1, 6)
                sessions[last].append(("changed", slot, values[2], values[1]))
                history[slot.name].append((last, values[2]))
        dates = [start] + [start + timedelta(days=d) for d in days]
        messages = []
        for s, events in enumerate(sessions):
            clock = dates[s] + timedelta(hours=9 + rng.randrange(8))
            turns = [("small", None, None, None)] * rng.randrange(1, 4) + events
            rng.shuffle(turns)
            # a correction follows its statement
            turns.sort(key=lambda e: {"corrected": 1}.get(e[0], 0))
            for kind, slot, value, old in turns:
                if kind == "small":
                    text = rng.choice(SMALL_TALK)
                else:
                    pool = {"stated": slot.stated, "changed": slot.changed, "corrected": slot.corrected}[kind]
                    text = rng.choice(pool).format(v=value, o=old, p=project)
                    text = text[0].upper() + text[1:]
                messages.append({"role": "user", "name": person, "timestamp": clock.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 "content": text})
                clock += timedelta(minutes=1)
                messages.append({"role": "assistant", "timestamp": clock.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                 "content": rng.choice(REPLIES)})
                clock += timedelta(minutes=2)
        conv = f"ku-{k:02d}-{person.lower()}"
        conversations.append({"id": conv, "messages": messages})
        for slot in mentioned:
            asked = slot.question.format(n=person, p=project)
            values = history[slot.name]
            stale = [v for _, v in values[:-1]]
            questions.append({"conv": conv, "half": slot.half, "slot": slot.name, "kind": "current",
                              "question": asked, "answer": values[-1][1], "stale": stale})
            if len(values) > 1:
                # a day strictly between the session that stated the earlier value and the next change
                at, value = values[-2]
                upto = values[-1][0]
                day = dates[at] + (dates[upto] - dates[at]) / 2
                questions.append({"conv": conv, "half": slot.half, "slot": slot.name, "kind": "as_of",
                                  "question": asked, "as_of": day.strftime("%Y-%m-%d"), "answer": value,
                                  "stale": [v for _, v in values if v != value]})
        for slot in mentioned:  # the current value asked in the past tense (after the others: the suite's
            values = history[slot.name]  # questions of 2026-11-29 and before are unchanged)
            questions.append({"conv": conv, "half": slot.half, "slot": slot.name, "kind": "past",
                              "question": slot.past.format(n=person, p=project), "answer": values[-1][1],
                              "stale": [v for _, v in values[:-1]]})
        questions.append({"conv": conv, "half": unmentioned.half, "slot": unmentioned.name, "kind": "unmentioned",
                          "question": unmentioned.question.format(n=person, p=project), "answer": None, "stale": []})
        for slot in mentioned:  # the time in the question's words
            values = history[slot.name]
            if len(values) < 2:
                continue
            then, before, earlier = WRITTEN[slot.name]
            at, value = values[-2]
            day = dates[at] + (dates[values[-1][0]] - dates[at]) / 2  # as the as_of question's day
            for kind, asked in (("dated", then.format(n=person, p=project, when=written_day(day, slot.half))),
                                ("before", before.format(n=person, p=project, v=values[-1][1])),
                                ("previous", earlier.format(n=person, p=project))):
                questions.append({"conv": conv, "half": slot.half, "slot": slot.name, "kind": kind, "question": asked,
                                  "answer": value, "stale": [v for _, v in values if v != value]})
    return conversations, questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--people", type=int, default=24)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    conversations, questions = build(args.people, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for conv in conversations:
        (args.out / f"{conv['id']}.json").write_text(json.dumps({"messages": conv["messages"]}, indent=1) + "\n")
    with open(args.out / "questions.jsonl", "w") as out:
        for q in questions:
            out.write(json.dumps(q) + "\n")
    print(f"{len(conversations)} conversations, {len(questions)} questions -> {args.out}")


if __name__ == "__main__":
    main()
