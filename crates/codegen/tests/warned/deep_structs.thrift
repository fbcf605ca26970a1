// A chain of structs, each holding the next: 64 levels, as Apache's Smalltalk
// tests hold 65 (lib/st/test/RecursionDepthTest.thrift). It compiles only in a crate
// with a higher recursion_limit, which the warning names.
struct Deep1 { 1: optional Deep2 next }
struct Deep2 { 1: optional Deep3 next }
struct Deep3 { 1: optional Deep4 next }
struct Deep4 { 1: optional Deep5 next }
struct Deep5 { 1: optional Deep6 next }
struct Deep6 { 1: optional Deep7 next }
struct Deep7 { 1: optional Deep8 next }
struct Deep8 { 1: optional Deep9 next }
struct Deep9 { 1: optional Deep10 next }
struct Deep10 { 1: optional Deep11 next }
struct Deep11 { 1: optional Deep12 next }
struct Deep12 { 1: optional Deep13 next }
struct Deep13 { 1: optional Deep14 next }
struct Deep14 { 1: optional Deep15 next }
struct Deep15 { 1: optional Deep16 next }
struct Deep16 { 1: optional Deep17 next }
struct Deep17 { 1: optional Deep18 next }
struct Deep18 { 1: optional Deep19 next }
struct Deep19 { 1: optional Deep20 next }
struct Deep20 { 1: optional Deep21 next }
struct Deep21 { 1: optional Deep22 next }
struct Deep22 { 1: optional Deep23 next }
struct Deep23 { 1: optional Deep24 next }
struct Deep24 { 1: optional Deep25 next }
struct Deep25 { 1: optional Deep26 next }
struct Deep26 { 1: optional Deep27 next }
struct Deep27 { 1: optional Deep28 next }
struct Deep28 { 1: optional Deep29 next }
struct Deep29 { 1: optional Deep30 next }
struct Deep30 { 1: optional Deep31 next }
struct Deep31 { 1: optional Deep32 next }
struct Deep32 { 1: optional Deep33 next }
struct Deep33 { 1: optional Deep34 next }
struct Deep34 { 1: optional Deep35 next }
struct Deep35 { 1: optional Deep36 next }
struct Deep36 { 1: optional Deep37 next }
struct Deep37 { 1: optional Deep38 next }
struct Deep38 { 1: optional Deep39 next }
struct Deep39 { 1: optional Deep40 next }
struct Deep40 { 1: optional Deep41 next }
struct Deep41 { 1: optional Deep42 next }
struct Deep42 { 1: optional Deep43 next }
struct Deep43 { 1: optional Deep44 next }
struct Deep44 { 1: optional Deep45 next }
struct Deep45 { 1: optional Deep46 next }
struct Deep46 { 1: optional Deep47 next }
struct Deep47 { 1: optional Deep48 next }
struct Deep48 { 1: optional Deep49 next }
struct Deep49 { 1: optional Deep50 next }
struct Deep50 { 1: optional Deep51 next }
struct Deep51 { 1: optional Deep52 next }
struct Deep52 { 1: optional Deep53 next }
struct Deep53 { 1: optional Deep54 next }
struct Deep54 { 1: optional Deep55 next }
struct Deep55 { 1: optional Deep56 next }
struct Deep56 { 1: optional Deep57 next }
struct Deep57 { 1: optional Deep58 next }
struct Deep58 { 1: optional Deep59 next }
struct Deep59 { 1: optional Deep60 next }
struct Deep60 { 1: optional Deep61 next }
struct Deep61 { 1: optional Deep62 next }
struct Deep62 { 1: optional Deep63 next }
struct Deep63 { 1: optional Deep64 next }
struct Deep64 { 1: optional i32 end }

service DeepService {
  Deep1 deep(1: Deep1 arg)
}
