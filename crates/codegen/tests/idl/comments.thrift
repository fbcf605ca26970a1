# Shell-style comment at the top.
// C++-style comment.
/* A block comment
   spanning lines, with "quotes" and 'quotes' and // and # inside. */
/**
 * A doc comment before a header is dropped.
 */
namespace rs comments # trailing hash comment
namespace * comments.all // trailing line comment

/** Quoting: both quote styles, every escape. */
struct Quoting {
    /// Double-quoted string with every escape.
    1: string dq = "tab\there \"quoted\" back\\slash nl\n cr\r apos\' e-acute \u00e9 smile \uD83D\uDE00",
    /** Single-quoted string. */
    2: string sq = 'single \'quoted\' with "double" inside',
    3: string empty = "",
    4: string not_comments = "# not a comment // nor this /* nor this */",
    5: string raw_utf8 = "héllo wörld ✓",
}

/**
 * Numbers: hex, signs, exponents; `,` and `;` separators, or none.
 *
 *   indented line kept
 */
struct Numbers {
    1: i32 hex = 0xCAFE; 2: i64 neg_hex = -0x1F;
    3: double exp = 1e3, 4: double neg_exp = -2.5E-4; 5: double frac = .5
    6: double plus = +1.25,
    7: i32 plus_int = +7
    8: double big = 6.02E+23
}

/**/ /***/
enum Sep { A = 1; B = 2, C = 3 D = 4 }

const list<i32> MIXED_SEPS = [1, 2; 3 4,]
const map<string, string> MAP_SEPS = {'a': "b"; "c": 'd', 'e':'f'}

struct /* inline */ Inline /* comments */ { /* everywhere */ 1: /* here */ i32 /* and */ x /* too */ }

service Doc {
    /// Line doc on a function
    /// spanning two lines.
    void a(),
    // A plain comment is not documentation.
    void b();
    /** Block doc. */ oneway void c()
	// A tab-indented comment.
	i32 d(1: i32 x; 2: i32 y;)
}
