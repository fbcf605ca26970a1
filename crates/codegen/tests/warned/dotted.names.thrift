// Included by include_dotted_stem.thrift: a file name with dots in its stem.
enum Color {
  RED = 1,
  GREEN = 2
}

struct Task {
  1: string title
}
