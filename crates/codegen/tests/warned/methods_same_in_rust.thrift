service S {
    void getItem()
    void get_item()
}
