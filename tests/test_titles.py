"""Titles and headings made of phrases of the document's own text (memcli/consolidate/titles.py)."""

from __future__ import annotations

from memcli.consolidate.titles import block_title, document_title, phrases
from memcli.store.format import Entry


def entry(text: str, speaker: str = "Caroline", time: str = "2023-05-25T13:14") -> Entry:
    return Entry({"seq": "1", "time": time, "speaker": speaker}, text)


def flat(term: str) -> float:
    return 1.0


def test_a_phrase_is_a_noun_phrase_of_the_text_without_filler_or_names_at_its_edges():
    text = "Thanks, Melanie! I really went to the LGBTQ support group yesterday and we made bowls last week."
    found = [p.text for p in phrases([text], flat, ["Caroline", "Melanie"])]
    assert "LGBTQ support group" in found and "bowls" in found and "support group" in found
    assert not {"went", "made", "yesterday", "last week", "week"} & set(found)  # verbs, nouns used as adverbs
    assert not any(p.split()[0].lower() in {"thanks", "really", "melanie", "the"} for p in found)
    assert all(p in text for p in found)


def test_a_phrase_never_cuts_a_name_nor_runs_on_past_its_noun_into_an_adjective():
    text = "Quick update: I went to an information evening at Open Door Adoptions last Tuesday."
    found = [p.text for p in phrases([text], flat)]
    assert "Open Door Adoptions" in found and "information evening" in found
    assert not {"Door Adoptions", "Open Door", "Adoptions last Tuesday", "Door Adoptions last Tuesday"} & set(found)


def test_a_title_is_up_to_three_recurring_phrases_and_the_people_never_a_keyword_list():
    entries = [entry("The adoption agency called about the home study."),
               entry("I picked an adoption agency that helps LGBTQ folks.", "Melanie"),
               entry("The home study is next week, then the adoption agency decides."),
               entry("My pottery class made a bowl."), entry("The pottery class is on Fridays.", "Melanie")]
    title = document_title(entries, flat)
    assert title.startswith("Adoption agency, ") and title.endswith(" (Caroline, Melanie)")
    rest = title[len("Adoption agency, "):-len(" (Caroline, Melanie)")].split(" and ")
    assert sorted(rest) == ["home study", "pottery class"]  # phrases of the text, sharing no word with another
    assert block_title(entries[:3], flat) == "2023-05-25 · adoption agency and home study"


def test_rare_words_outweigh_common_ones_and_a_text_of_one_word_still_has_a_title():
    idf = {"coffe": 0.1, "meteor": 3.0, "shower": 2.0}.get
    found = phrases(["I had coffee and watched the meteor shower.", "Coffee again."], lambda t: idf(t, 1.0))
    assert found[0].text == "meteor shower"
    assert document_title([entry("Thanks!"), entry("Okay, yes.", "Melanie")], flat) == "Notes (Caroline, Melanie)"
    assert document_title([entry("Pottery!")], flat) == "Pottery (Caroline)"


def test_a_title_does_not_begin_with_the_first_phrase_of_a_sibling_while_it_has_another():
    from memcli.consolidate.titles import lead

    entries = [entry("The dance studio opened and the grand opening was packed."),
               entry("The grand opening of the dance studio had a dance studio tour.", "Jon"),
               entry("The dance studio needs new floors.")]
    title = document_title(entries, flat)
    assert lead(title) == "dance studio" and lead("Home study, adoption agencies (Caroline)") == "home study"
    other = document_title(entries, flat, taken={"dance studio"})
    assert lead(other) != "dance studio" and "dance studio" in other.lower()  # it may still come after
    assert document_title([entry("Pottery!")], flat, taken={"pottery"}) == "Pottery (Caroline)"  # nothing else


def test_a_file_name_holds_whole_words_of_its_title():
    from memcli.consolidate.lexical import slug

    name = slug("Adoption agencies, home study and charity race (Caroline, Melanie)")
    assert name == "adoption-agencies-home-study-and-charity-race" and len(name) <= 48
    assert slug("Supercalifragilisticexpialidocious" * 3) == ("supercalifragilisticexpialidocious" * 3)[:48]
    assert slug("Café, été") == "cafe-ete" and slug("!!!") == "topic"
