"""Regenerate the Lucene reference data of vdr's ``lucene`` analyzer (issue 24.2), with Lucene itself.

Writes two files:

* ``vdr/retrieve/_lucene_tables.py``: the character classes of Lucene's ``StandardTokenizer``
  (Unicode 9.0 word-break properties and Unicode 11.0 emoji properties, as JFlex compiled them into
  ``StandardTokenizerImpl``), read from the class's own tables, and the lower-case mappings of the
  JVM that differ from Python's;
* ``tests/data/lucene_<version>_english.json.gz``: Lucene's analysis of a reference list (the
  sample's pages, generated text, a large word list) through Pyserini's analyzer API
  (``Analyzer(get_lucene_analyzer()).analyze(text)``: Anserini's ``DefaultEnglishAnalyzer``, the
  analyzer of Pyserini's BM25 indexes), and the tokenizer's behaviour on every code point in 25
  contexts (a code-point sweep, run-length encoded), with the Lucene, Anserini, Pyserini and Java
  versions.

Needs Pyserini (its Anserini fat jar holds Lucene) and a Java 21+ (found as the ``pyserini``
backend finds it; JDK 25 at ``/usr/lib/jvm/temurin-25-jdk-amd64`` here). Run from the repository
root (about two minutes)::

    python tests/make_lucene_fixture.py

``tests/test_lucene_analyzer.py`` compares vdr's analyzer with the recorded data (core tier, no
Java) and with Lucene itself on fresh random text (slow tier, when Pyserini and Java 21+ are here).
The text generator below (:func:`random_texts`) is shared with that live test.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "vdr" / "retrieve" / "_lucene_tables.py"
SEED = 24

# ------------------------------------------------------------------------------------- the generator

#: contexts of the code-point sweep (``{c}``: the code point): alone, doubled, between and beside
#: letters, digits, Katakana, Hebrew, Thai, Hangul, Hiragana, underscores, and with the marks,
#: selectors, modifiers, joiners and flags the emoji rules look at
SWEEP_CONTEXTS = ["{c}", "{c}{c}", "x{c}x", "1{c}1", "x{c}", "{c}x", "1{c}", "{c}1", "\u30a2{c}\u30a2", "\u05d0{c}\u05d0",
                  "{c}\u0301", "{c}\ufe0f", "{c}\U0001f3fd", "\U0001f44d{c}", "\u0e01{c}\u0e01", "\ud55c{c}\ud55c", "_{c}_",
                  "{c}\u200d\U0001f600", "{c}\u20e3", "x{c}{c}x", "\u05d0{c}", "{c}\ufe0f\u20e3", "\U0001f1eb{c}",
                  "{c}\U0001f1f7", "\u3042{c}\u3042"]

#: pieces of generated text: numbers, hyphens, apostrophes and possessives, accents (composed and
#: decomposed), URLs, e-mails, scripts (CJK, Kana, Hangul, Thai, Lao, Khmer, Myanmar, Hebrew, Arabic,
#: Devanagari, Greek, Cyrillic, Armenian), emoji sequences, underscores, symbols, odd spaces, joiners
ATOMS = """
3.14 1,000 1,000.50 1.2.3 12:30 12:30:45 2024-01-01 $5 50% 3rd 1990s 1990's x86_64 0.5e-3 +33 1/2 ½ ² ³ ١٢٣ ۱۲۳ １２３ ４５ 10e6 0x1F 1'000 1’000 1;2 1.a a.1 1a a1 a1b2 007 3.14.15.92
e-mail state-of-the-art -- — – ‐ co-operate re-enter pre-war 20-year-old self-contained X-ray
don't won't O'Neil O’Neil rock'n'roll 'quoted' ’quoted’ students' James's JAMES'S it’s it＇s dog's dogs's s's 's ’s Cat’S l'amour qu'il y'all ma'am
café naïve résumé Zürich São Paulo ﬁnancial ﬂow Straße STRASSE İstanbul ISTANBUL ΣΟΦΙΑ ΌΣΟΣ Ελληνικά Москва Ёлка Ǆemal ǅ ǆ Ⅻ ⅻ ﬀ Ｆｕｌｌｗｉｄｔｈ
cafe\u0301 nai\u0308ve A\u030angstro\u0308m e\u0301\u0301 \u0301x x\u0301\u0301y
https://www.example.com/path?q=1&x=y#frag http://x.y/z www.foo-bar.org ftp://a.b/c file:///tmp/a_b.txt john.doe@example.co.uk a@b.com user+tag@mail.example.org mailto:x@y.z 192.168.0.1 ::1 C:\\Users\\x
東京は日本の首都です 中文分词测试 北京大学 カタカナ ラーメン コーヒー・ブレイク ﾊﾝｶｸ ひらがな ありがとう 한국어 텍스트 서울특별시 ภาษาไทย สวัสดีครับ ລາວ ខ្មែរ မြန်မာ 々 〆 ヶ
עברית צה"ל ג'ירפה ש״ח בית־ספר العربية مرحبا بالعالم हिन्दी नमस्ते ελληνικά Ἀθῆναι հայերեն Հայաստան՝ ქართული አማርኛ
👍 👍🏽 😀🏽 👨‍👩‍👧 👩🏽‍💻 🇫🇷🇩🇪 🇫🇷 🇺 1️⃣ #️⃣ *⃣ 1⃣ ❤️ ❤ ☺ ☺️ ★ ☆ ♥ ♪ ✓ ✔️ © ® ™ ℹ️ Ⓜ 🅰 🏴󠁧󠁢󠁳󠁣󠁴󠁿 😀︎ 🙂\u200d 〰 〽
snake_case __init__ _x_ a__b ___ _ _1 1_ a_1 x‿y a‿ ＿a a\u202fb 10\u202f000
x²+y² α-β ∑ ∞ √2 ±3 ≤ → ← ⇒ ° µm 5µm 25°C № ℃ ™x x™ x©y ℹx
... ?! a.b.c. a.b.c U.S.A. e.g. i.e. Ph.D. c:a a:b:c l·l x·y a.b a..b a.,b a'b a''b a'.b a.'b 1..2 1.,2 a"b a:1 1:a a;b 1;2 a,b 1,a
co\u00adoperate in\u200bvisible zero\u200cwidth join\u200der x\u2060y x\ufeffy tab\there new\nline cr\rlf nb\u00a0sp ideo\u3000space en\u2002space
‘single’ “double” «guillemets» „low“ ‹a› 「括弧」 『二重』 【墨付き】 (paren) [bracket] {brace} <angle>
""".split()
#: words for generated text (stems, suffixes, stopwords, case variants)
WORDS = ("the a an and are as at be but by for if in into is it no not of on or such that their then there these "
         "they this to was will with The THE A An sociology technology responsibly us US Us caresses ponies ties "
         "relational conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli "
         "analogousli vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti "
         "sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival "
         "allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment dependent "
         "adoption homologou communism activate angulariti homologous effective bowdlerize probate rate cease "
         "controll roll generalizations oscillators running runner ran runs happily happiness agreed feed bled "
         "sized hopping hoping falling filing fizzed failing MIXEDcase CamelCase iPhone eBay McDonald's").split()
SEPARATORS = [" ", " ", " ", " ", "", "\n", ", ", ". ", "-", "/", "'", "\u2019", ".", ":", "_", "\t", "  ", "\u00a0", "; ", "?", "\u200d",
              "\u0301", "\ufe0f", "@", "#", "&", "=", "+", "\u00ad", "|"]


def long_tokens(rng: random.Random) -> list[str]:
    """Tokens around Lucene's maximum token length (255 UTF-16 units): letters, digits, mixed,
    with a mark, an apostrophe or a supplementary letter at and near the cut."""
    out = []
    for n in (254, 255, 256, 257, 300, 509, 510, 511, 600, 1000):
        out.append("a" * n)
        out.append("7" * n)
        out.append("".join(rng.choice("ab1_") for _ in range(n)))
    for k in range(248, 262):
        out.append("b" * k + "'s" + "c" * 20)
        out.append("b" * k + ".d" + "e" * 10)
        out.append("b" * k + "\U00010428" + "f" * 10)  # a Deseret letter (2 UTF-16 units) across the cut
        out.append("b" * k + "\u0301" + "g" * 10)
        out.append("9" * k + ",5" + "6" * 10)
    return out


def random_texts(seed: int, n: int) -> list[str]:
    """``n`` texts of 1-40 pieces (:data:`ATOMS`, :data:`WORDS`, long tokens, random code points
    of many scripts) joined by random separators; deterministic for a seed."""
    rng = random.Random(seed)
    longs = long_tokens(rng)
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x52F), (0x590, 0x6FF), (0x900, 0x97F), (0xE00, 0xEFF), (0x1100, 0x11FF),
              (0x2000, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x4E80), (0xAC00, 0xAC80), (0xFE00, 0xFFEF), (0x1F000, 0x1FAFF),
              (0x10400, 0x1044F), (0x1D400, 0x1D4FF), (0xE0000, 0xE007F)]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.35:
                p = rng.choice(ATOMS)
            elif r < 0.75:
                p = rng.choice(WORDS)
            elif r < 0.78:
                p = rng.choice(longs)
            else:
                lo, hi = rng.choice(ranges)
                p = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 4)))
            parts.append(p)
            parts.append(rng.choice(SEPARATORS))
        out.append("".join(parts[:-1]))
    return out


SUFFIXES = ("s es ed ing ly ness ful fulness less lessness ment ments ize ise izes ized izing ization izations izer "
            "ational ation ations ator ators al alism alist alistic ality alities alize alized alli ally ance ances ancy "
            "ence ences ency er ers est ic ical ically icate icated icates iciti icity ism isms ist ists ity ities ive "
            "ively iveness ivity iviti able ably ability abli ible ibly ibility ous ously ousness ousli ent ently entli "
            "eli bli bly logi logy logies ology ologist y ies ied ying eed eeds eedly at ate ated ating bl iz e ement "
            "ant ants enci anci fulli lessli aliti biliti abiliti tional tion sion ion ions ure sses ss").split()


def word_list(texts: list[str], seed: int, n_generated: int) -> list[str]:
    """Distinct lower-case words: every alphabetic word of ``texts``, and ``n_generated`` of their
    combinations with :data:`SUFFIXES` (after a final ``e`` dropped and a final ``y`` turned into
    ``i``), to exercise every rule of the Porter stemmer; plus words with digits and accents."""
    base = sorted({w.lower() for t in texts for w in re.findall(r"[A-Za-z]+", t)})
    combos = set()
    for w in base:
        if len(w) >= 3:
            for s in SUFFIXES:
                combos.add(w + s)
                if w.endswith("e"):
                    combos.add(w[:-1] + s)
                if w.endswith("y"):
                    combos.add(w[:-1] + "i" + s)
    rng = random.Random(seed)
    picked = rng.sample(sorted(combos - set(base)), min(n_generated, len(combos)))
    extra = ["1990s", "3rd", "x86s", "b2b", "caf\u00e9s", "na\u00efveties", "stra\u00dfes", "\u00e9t\u00e9s", "\u0131s",
             "\U00010428\U00010429s", "\U00010428s", "\u00e7s", "aies", "yies", "sses", "ss", "s", "is", "as", "us",
             "yes", "ies", "ied", "eed", "ing", "ed", "y", "by", "sky", "skies", "dying", "lying", "tying", "\u00fcbers"]
    return sorted(set(base) | set(picked) | set(extra))


# ------------------------------------------------------------------------------------- Lucene


JAVA_HELPER = r"""
import java.io.*;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;
import org.apache.lucene.analysis.standard.StandardTokenizer;
import org.apache.lucene.analysis.tokenattributes.OffsetAttribute;

/** vdr's reference extractor: StandardTokenizerImpl's character classes, the sweep, lower case. */
public class VdrLuceneReference {
  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(new FileOutputStream(args[1]), false, "UTF-8");
    Class<?> c = Class.forName("org.apache.lucene.analysis.standard.StandardTokenizerImpl");
    Field ft = c.getDeclaredField("ZZ_CMAP_TOP"); ft.setAccessible(true);
    Field fb = c.getDeclaredField("ZZ_CMAP_BLOCKS"); fb.setAccessible(true);
    int[] top = (int[]) ft.get(null); int[] blocks = (int[]) fb.get(null);
    int prev = -1, start = 0;
    for (int cp = 0; cp <= 0x110000; cp++) {
      int k = cp < 0x110000 ? blocks[top[cp >> 8] | (cp & 0xFF)] : -2;
      if (k != prev) { if (prev != -1) out.println("C " + start + " " + (cp - 1) + " " + prev); prev = k; start = cp; }
    }
    for (int cp = 0; cp < 0x110000; cp++) {
      int lo = Character.toLowerCase(cp);
      if (lo != cp) out.println("L " + cp + " " + lo);
    }
    List<String> contexts = Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8);
    StandardTokenizer tok = new StandardTokenizer();
    OffsetAttribute off = tok.addAttribute(OffsetAttribute.class);
    String prevSig = null; int runStart = 0;
    for (int cp = 0; cp <= 0x110000; cp++) {
      String sig = null;
      if (cp < 0x110000 && (cp < 0xD800 || cp > 0xDFFF)) {
        String ch = new String(Character.toChars(cp));
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < contexts.size(); i++) { if (i > 0) sb.append(' '); sb.append(contexts.get(i).replace("{c}", ch)); }
        String line = sb.toString();
        tok.setReader(new StringReader(line)); tok.reset();
        StringBuilder s = new StringBuilder();
        while (tok.incrementToken()) {
          s.append(line.codePointCount(0, off.startOffset())).append('-').append(line.codePointCount(0, off.endOffset())).append(',');
        }
        tok.end(); tok.close();
        sig = s.toString();
      } else if (cp < 0x110000) {
        sig = prevSig;  // surrogates: not code points; continue the run
      }
      if (!Objects.equals(sig, prevSig) || cp == 0x110000) {
        if (prevSig != null) out.println("S " + runStart + " " + (cp - 1) + " " + prevSig);
        prevSig = sig; runStart = cp;
      }
    }
    out.close();
  }
}
"""

#: class name -> a code point that Lucene 9.9's StandardTokenizerImpl puts in that class (its
#: meaning in the grammar of ``StandardTokenizerImpl.jflex``)
CLASS_EXAMPLES = {
    "Other": 0x20,  # no rule: skipped
    "Double_Quote": 0x22,
    "KeyCap_Base_Symbol": 0x23,  # '#', '*': an emoji keycap base, nothing else
    "Single_Quote": 0x27,
    "MidNum": 0x2C,
    "MidNumLet": 0x2E,
    "Numeric_KeyCap_Base": 0x30,  # ASCII digits: Numeric and a keycap base
    "MidLetter": 0x3A,
    "ALetter": 0x61,
    "ExtendNumLet": 0x5F,
    "Emoji": 0x1F600,  # Extended_Pictographic or Emoji (not a keycap base, regional indicator or modifier)
    "Extend": 0x301,  # Word_Break Extend or Format
    "Hebrew_Letter": 0x5D0,
    "Numeric": 0x660,
    "Complex_Context": 0xE01,  # Line_Break SA (Thai, Lao, Myanmar, Khmer...)
    "Complex_Context_Extend": 0xE31,  # SA and Extend
    "Hangul": 0xAC00,  # ALetter of the Hangul script
    "ZWJ": 0x200D,
    "KeyCap": 0x20E3,  # COMBINING ENCLOSING KEYCAP (Extend)
    "ALetter_Emoji": 0x24C2,  # ALetter and Emoji
    "Han": 0x4E00,
    "Katakana": 0x30A2,
    "Hiragana": 0x3042,
    "VS15": 0xFE0E,  # Extend, text presentation selector
    "VS16": 0xFE0F,  # Extend, emoji presentation selector
    "Regional_Indicator": 0x1F1E6,
    "Emoji_Modifier": 0x1F3FB,  # Extend (JFlex's Unicode 9 data) and an emoji modifier
    "Tag_Spec": 0xE0020,
    "Tag_Term": 0xE007F,
}


def find_java_and_jar() -> tuple[Path, Path]:
    """(Java 21+ home, Anserini's fat jar in the Pyserini install)."""
    sys.path.insert(0, str(ROOT))
    from vdr.retrieve.pyserini import find_java, unavailable_reason

    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"make_lucene_fixture: {reason}")
    import importlib.util

    spec = importlib.util.find_spec("pyserini")
    jars = sorted(Path(spec.origin).parent.glob("resources/jars/anserini-*-fatjar.jar"))
    if not jars:
        raise SystemExit("make_lucene_fixture: no Anserini fat jar in the Pyserini install")
    return find_java()[0], jars[-1]


def java_reference(java: Path, jar: Path) -> tuple[list, dict, list]:
    """Run the helper above (Java's source launcher): (class ranges, lower-case map, sweep runs)."""
    with tempfile.TemporaryDirectory(prefix="vdr-lucene-") as tmp:
        src, ctx, out = Path(tmp) / "VdrLuceneReference.java", Path(tmp) / "contexts.txt", Path(tmp) / "out.txt"
        src.write_text(JAVA_HELPER, encoding="utf-8")
        ctx.write_text("\n".join(SWEEP_CONTEXTS) + "\n", encoding="utf-8")
        subprocess.run([str(java / "bin" / "java"), "-cp", str(jar), str(src), str(ctx), str(out)], check=True)
        lines = out.read_text(encoding="utf-8").splitlines()
    classes, lower, sweep = [], {}, []
    for line in lines:
        kind, *f = line.split(" ")
        if kind == "C":
            classes.append((int(f[0]), int(f[1]), int(f[2])))
        elif kind == "L":
            lower[int(f[0])] = int(f[1])
        else:
            spans = [tuple(map(int, s.split("-"))) for s in f[2].split(",") if s] if len(f) > 2 else []
            sweep.append((int(f[0]), int(f[1]), spans))
    return classes, lower, sweep


def name_classes(classes: list) -> dict[str, list[tuple[int, int]]]:
    """``{class name: [(first, last), ...]}`` (:data:`CLASS_EXAMPLES` names each JFlex class)."""
    ids: dict[int, str] = {}
    for name, cp in CLASS_EXAMPLES.items():
        k = next(k for a, b, k in classes if a <= cp <= b)
        if k in ids:
            raise SystemExit(f"make_lucene_fixture: {name} and {ids[k]} are one class in this Lucene: update CLASS_EXAMPLES")
        ids[k] = name
    unnamed = {k for _, _, k in classes} - set(ids) - {next(k for a, b, k in classes if a <= 0xD800 <= b)}
    if unnamed:
        raise SystemExit(f"make_lucene_fixture: StandardTokenizerImpl has classes {sorted(unnamed)} vdr does not know")
    out: dict[str, list] = {n: [] for n in CLASS_EXAMPLES if n != "Other"}
    for a, b, k in classes:
        name = ids.get(k, "Other")
        if name != "Other" and not (a >= 0xD800 and b <= 0xDFFF):
            out[name].append((a, b))
    return out


def write_tables(named: dict, lower: dict, versions: dict) -> None:
    """Write ``vdr/retrieve/_lucene_tables.py`` (generated; ranges in hex)."""
    in_tokens = [(a, b) for n, rs in named.items() for a, b in rs]
    diffs = {}
    for a, b in in_tokens:
        for cp in range(a, b + 1):
            jl = chr(lower.get(cp, cp))
            if jl != chr(cp).lower():  # Python's full mapping differs from the JVM's Character.toLowerCase
                diffs[cp] = ord(jl)
    lines = ['"""Character classes of Lucene\'s ``StandardTokenizer`` and the JVM\'s lower case where Python\'s differs.',
             "",
             f"GENERATED by ``tests/make_lucene_fixture.py`` from Lucene {versions['lucene']}'s ``StandardTokenizerImpl`` (JFlex,",
             "``%unicode 9``: Unicode 9.0 word-break properties, Unicode 11.0 emoji data) and the",
             f"``Character.toLowerCase`` of Java {versions['java']}; do not edit. Used by :mod:`vdr.retrieve.analyzers`.",
             '"""',
             "",
             f"LUCENE_VERSION = {versions['lucene']!r}",
             f"JAVA_VERSION = {versions['java']!r}",
             "",
             "#: class name -> its code points, ``first-last`` or ``single`` (hex), space-separated; a code point",
             "#: in none of them is ``Other`` (no rule of the tokenizer takes it)",
             "CLASSES = {"]
    for name, rs in named.items():
        wrapped = textwrap.wrap(" ".join(f"{a:X}" if a == b else f"{a:X}-{b:X}" for a, b in rs), 96)
        lines.append(f"    {name!r}: (")
        lines += [f"        {(w + ' ' if i < len(wrapped) - 1 else w)!r}" for i, w in enumerate(wrapped)]
        lines.append("    ),")
    lines.append("}")
    lines.append("")
    lines.append("#: code point -> the JVM's ``Character.toLowerCase`` where Python's ``str.lower`` of that one")
    lines.append("#: character differs, for the characters a token can hold")
    lines.append("LOWER_CASE = {" + ", ".join(f"0x{a:X}: 0x{b:X}" for a, b in sorted(diffs.items())) + "}")
    TABLES.write_text("\n".join(lines) + "\n", encoding="utf-8")


def sample_texts() -> list[str]:
    """The text of every page of the bundled sample (``assets/sample_corpus``, ingested with vdr)."""
    sys.path.insert(0, str(ROOT))
    from vdr.ingest import ingest_pdfs
    from vdr.corpus import Corpus

    with tempfile.TemporaryDirectory(prefix="vdr-sample-") as tmp:
        ingest_pdfs(ROOT / "assets" / "sample_corpus" / "pdfs", Path(tmp) / "c")
        return [p.text for p in Corpus.load(Path(tmp) / "c").pages()]


def repo_texts() -> list[str]:
    """The Markdown files and the Python sources of ``vdr/`` (real English words for the stemmer)."""
    paths = sorted(glob.glob(str(ROOT / "*.md")) + glob.glob(str(ROOT / "docs" / "*.md")) + glob.glob(str(ROOT / "vdr" / "**" / "*.py"), recursive=True))
    return [Path(p).read_text(encoding="utf-8") for p in paths if Path(p) != TABLES]


def main() -> None:
    java, jar = find_java_and_jar()
    os.environ["JAVA_HOME"] = str(java)
    from pyserini.analysis import Analyzer, get_lucene_analyzer  # starts the JVM
    from jnius import autoclass
    from importlib import metadata

    versions = {"lucene": autoclass("org.apache.lucene.util.Version").LATEST.toString(),
                "anserini": jar.name.removeprefix("anserini-").removesuffix("-fatjar.jar"),
                "pyserini": metadata.version("pyserini"),
                "java": autoclass("java.lang.System").getProperty("java.version")}
    classes, lower, sweep = java_reference(java, jar)
    write_tables(name_classes(classes), lower, versions)
    analyzer = Analyzer(get_lucene_analyzer())
    pages = sample_texts()
    texts = pages + random_texts(SEED, 1600)
    words = word_list(pages + repo_texts(), SEED, 40_000)
    analysed = [list(analyzer.analyze(t)) for t in texts]
    terms = ["\t".join(analyzer.analyze(w)) for w in words]
    sigs: dict[tuple, int] = {}
    runs = []
    for a, b, spans in sweep:
        runs.append([a, b, sigs.setdefault(tuple(map(tuple, spans)), len(sigs))])
    small_float = autoclass("org.apache.lucene.util.SmallFloat")
    lengths = list(range(0, 3001)) + [4095, 4096, 10_000, 65_535, 100_000, 1_000_000, 2**24, 2**31 - 1]
    norm_bytes = [small_float.intToByte4(n) & 0xFF for n in lengths]
    doc = {
        "versions": versions,
        "norms": {"source": "org.apache.lucene.util.SmallFloat.intToByte4 / byte4ToInt", "lengths": lengths, "bytes": norm_bytes,
                  "decoded": [small_float.byte4ToInt(b if b < 128 else b - 256) for b in norm_bytes]},
        "analyzer": "pyserini.analysis.get_lucene_analyzer() (Anserini DefaultEnglishAnalyzer: StandardTokenizer, "
                    "EnglishPossessiveFilter, LowerCaseFilter, StopFilter, PorterStemFilter)",
        "generator": "tests/make_lucene_fixture.py",
        "texts": [[t, a] for t, a in zip(texts, analysed)],
        "words": words,
        "word_terms": terms,
        "sweep": {"tokenizer": "org.apache.lucene.analysis.standard.StandardTokenizer (max token length 255)",
                  "contexts": SWEEP_CONTEXTS, "separator": " ",
                  "signatures": [[list(s) for s in sig] for sig in sigs], "runs": runs},
    }
    path = ROOT / "tests" / "data" / f"lucene_{versions['lucene']}_english.json.gz"
    data = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:  # reproducible bytes
        f.write(data)
    print(path, path.stat().st_size, "bytes;", TABLES, TABLES.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
