service Base {
    void getItem()
}
service Derived extends Base {
    void get_item()
    oneway void Oneway()
}
