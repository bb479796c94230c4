from django.apps import AppConfig


class OrdersConfig(AppConfig):
    name = "hookinbox.examples.django_shop.orders"
    label = "shop_orders"
