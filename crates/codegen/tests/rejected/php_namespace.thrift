php_namespace "Foo"
