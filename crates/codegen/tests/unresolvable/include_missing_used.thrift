include "nowhere.thrift"
struct A { 1: nowhere.B b }
