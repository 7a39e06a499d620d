"""Accounts: `grader roster import` (students from a CSV, each new one with a personal sign-in link)
and the instructor's one-time link."""

from __future__ import annotations

import re

import pytest

from grader.cli import main
from grader.course.store import Store
from grader.service import accounts


@pytest.mark.unit
def test_a_roster_import_prints_a_full_link_per_new_student_and_keeps_active_ones(tmp_path, capsys):
    roster, db = tmp_path / "roster.csv", str(tmp_path / "class.db")
    roster.write_text("id,name,tier\nalice,Alice Liddell,premium\nbob,,\n")
    argv = ["roster", "import", str(roster), "--db", db, "--base-url", "http://127.0.0.1:8123"]
    assert main(argv) == 0
    links = dict(re.findall(r"^(\w+): (http://127\.0\.0\.1:8123/signin/\S+)$", capsys.readouterr().out, re.M))
    assert set(links) == {"alice", "bob"}
    with Store(db) as store:
        assert [(s.id, s.name, s.tier) for s in accounts.students(store)] == [
            ("alice", "Alice Liddell", "premium"), ("bob", "", "free")]
        token = links["alice"].rsplit("/", 1)[1]
        session = accounts.session(store, accounts.sign_in(store, token))
        assert session and session.student == "alice" and session.tier == "premium"
    assert main(argv) == 0  # again: the links given out keep working, none is printed twice
    assert "has an active link" in capsys.readouterr().out


@pytest.mark.unit
def test_a_roster_with_a_bad_line_is_refused_whole(tmp_path, capsys):
    roster, db = tmp_path / "roster.csv", str(tmp_path / "class.db")
    roster.write_text("id,tier\ncarol,free\n../etc,free\n")
    assert main(["roster", "import", str(roster), "--db", db]) == 2
    assert "roster line 3" in capsys.readouterr().err
    with Store(db) as store:
        assert accounts.students(store) == []
    roster.write_text("name\nno id column\n")
    assert main(["roster", "import", str(roster), "--db", db]) == 2
    assert "'id' column" in capsys.readouterr().err


@pytest.mark.unit
def test_a_spreadsheets_csv_utf8_export_is_read_with_its_byte_order_mark(tmp_path, capsys):
    roster, db = tmp_path / "roster.csv", str(tmp_path / "class.db")
    roster.write_bytes("\ufeffid,name,tier\r\nexcel1,Émile,free\r\n".encode())
    assert main(["roster", "import", str(roster), "--db", db]) == 0
    with Store(db) as store:
        assert [(s.id, s.name) for s in accounts.students(store)] == [("excel1", "Émile")]


@pytest.mark.parametrize("data, expected", [
    (b"id,name\nzed,\"Z\n", "roster line 2: unexpected end of data"),  # a quote left open
    (b"id,name\nzed," + b"a" * 140_000 + b"\n", "roster line 2: field larger than field limit"),
    (b"id,tier\ndup1,free\ndup1,premium\n", "roster line 3: dup1 is listed already, on line 2"),
    (b"id,id,name\nann,bob,Ann\n", "the roster's header names the column 'id' twice"),
    (b"id\nerin\nErin\n", "roster line 3: Erin is listed already, on line 2"),
    (b"id,name\nann,Ann\nbob,B\xe9b\n", "roster line 3: not UTF-8 text"),
])
def test_a_roster_csv_cannot_read_whole_is_refused_naming_the_line(tmp_path, capsys, data, expected):
    roster, db = tmp_path / "roster.csv", str(tmp_path / "class.db")
    roster.write_bytes(data)
    assert main(["roster", "import", str(roster), "--db", db]) == 2
    assert expected in capsys.readouterr().err
    with Store(db) as store:
        assert accounts.students(store) == []


@pytest.mark.unit
def test_a_new_instructor_link_replaces_an_unused_one_and_each_works_once(tmp_path):
    with Store(tmp_path / "class.db") as store:
        first = accounts.new_link(store, "instructor")
        second = accounts.new_link(store, "instructor")
        assert accounts.sign_in(store, first) is None  # printed by an earlier start: no longer valid
        session = accounts.sign_in(store, second)
        assert session and accounts.session(store, session).is_instructor
        assert accounts.sign_in(store, second) is None


@pytest.mark.unit
def test_a_roster_names_every_bad_line_at_once(tmp_path, capsys):
    roster, db = tmp_path / "roster.csv", str(tmp_path / "class.db")
    roster.write_text("id,tier\nann,free\n../etc,free\nbob,gold\nann,premium\ncy,premium\nzed,\"open\n")
    assert main(["roster", "import", str(roster), "--db", db]) == 2
    said = capsys.readouterr().err
    for line in ("roster line 3: invalid student id '../etc'", "roster line 4: unknown tier 'gold'",
                 "roster line 5: ann is listed already, on line 2", "roster line 7: unexpected end of data"):
        assert line in said, said
    with Store(db) as store:
        assert accounts.students(store) == []
        accounts.add_student(store, "Dee")
        with pytest.raises(accounts.RosterError) as refused:
            accounts.import_roster(store, "id\ndee\nann\nDEE\n")
        assert refused.value.problems == ["roster line 4: DEE is listed already, on line 2"]
        with pytest.raises(accounts.RosterError) as refused:
            accounts.import_roster(store, "id\ndee\nann\n")
        assert len(refused.value.problems) == 1 and "differs from the student Dee only in case" in str(refused.value)


@pytest.mark.unit
def test_a_roster_line_with_the_ta_role_makes_a_teaching_assistant_with_a_link_of_their_own(tmp_path, capsys):
    from grader.service import staff

    roster, db = tmp_path / "roster.csv", str(tmp_path / "class.db")
    roster.write_text("id,name,role\nalice,Alice Liddell,\nbea,Bea Assistant,TA\n")
    argv = ["roster", "import", str(roster), "--db", db, "--base-url", "http://127.0.0.1:8123"]
    assert main(argv) == 0
    links = dict(re.findall(r"^(\w+)(?: \(TA\))?: (http://127\.0\.0\.1:8123/signin/\S+)$", capsys.readouterr().out,
                            re.M))
    assert set(links) == {"alice", "bea"}
    with Store(db) as store:
        assert [s.id for s in accounts.students(store)] == ["alice"], "a TA was made a student"
        assert [(t.id, t.name, t.link_active) for t in staff.teaching_assistants(store)] == [
            ("bea", "Bea Assistant", True)]
        session = accounts.session(store, accounts.sign_in(store, links["bea"].rsplit("/", 1)[1]))
        assert session and session.is_ta and session.ta == "bea" and session.is_staff
        assert not session.is_instructor and session.student is None and session.by == "TA bea"
    assert main(argv) == 0  # again: the TA's link is kept
    assert "bea (TA): has an active link" in capsys.readouterr().out
    roster.write_text("id,role\ncarol,assistant\n")
    assert main(["roster", "import", str(roster), "--db", db]) == 2
    assert "roster line 2: unknown role 'assistant'; use student or ta" in capsys.readouterr().err
